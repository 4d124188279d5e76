"""mini_swe's trusted test runner: runs in the grading sandbox, reports through a signed channel.

The server runs it as ``python -I -S -B mini_swe_guard.py <site-packages> <repo> <ini> <test file>...``
in a fresh sandbox, with the run's key (hex) on stdin. ``-I -S`` means no ``site``, no ``.pth``
files, no ``sitecustomize`` / ``usercustomize``, no user site and no ``PYTHON*`` variables; this
file then puts only the trusted site-packages (without processing ``.pth`` files) and the
repository on ``sys.path`` and runs pytest with ``--noconftest``, ``-c <trusted ini>`` (the
repository's ``pytest.ini`` / ``setup.cfg`` / ``tox.ini`` / ``pyproject.toml`` are never read),
``-p no:cacheprovider`` and plugin autoload disabled.

Before any repository module is imported, it:

- reads the key from stdin, moves its stdout to a private descriptor (the report channel) and
  points descriptor 1 at stderr, so nothing the tests print can look like a report line;
- snapshots the pytest internals a forger patches (``Function.runtest``, ``pytest_pyfunc_call``,
  ``call_and_report``, ``CallInfo.from_call``, ``TestReport`` and friends, the outcomes,
  pluggy's call loop, ``builtins.__import__``, ``sys.exit``, ``os._exit``...) and, once pytest
  has started, the hook implementations it relies on; it checks them after every test and at
  the end, and reports any change as tampering;
- wraps each test function so that a pass needs its body to have run and returned (a patched
  ``runtest`` that skips the body leaves the test "not run").

Each report line is ``<hmac> <seq> <kind> <hex field>...``: HMAC-SHA256 with the run's key over
the rest, numbered from 0, ended by an ``end`` record written after pytest returned. The
server (``mini_swe_sandbox.read_report``) rejects unsigned, out-of-order or late lines and a
report without its end. The key is held by a C HMAC object, never as a Python attribute.

Limits: the repository's code runs in this interpreter (the tests import it), so these checks
raise the bar; they do not make the process trustworthy. What keeps the grade honest no matter
what runs here is outside it: the verdict is computed by the server and the grader from the
signed records, against the expected test ids, in processes this code cannot reach.

Standard library and pytest only; never imported by the server.
"""

import os
import sys

_write = os.write
_exit = os._exit


def _read_key() -> bytes:
    data = b""
    while not data.endswith(b"\n") and len(data) < 512:
        chunk = os.read(0, 512 - len(data))
        if not chunk:
            break
        data += chunk
    return bytes.fromhex(data.decode("ascii").strip())


class Channel:
    """Signed, numbered report lines on a descriptor of our own."""

    def __init__(self, key: bytes, fd: int) -> None:
        try:
            import _hashlib

            mac = _hashlib.hmac_new(key, digestmod="sha256")
        except (ImportError, AttributeError, ValueError):  # no OpenSSL: the pure-Python HMAC
            import hmac

            mac = hmac.new(key, digestmod="sha256")
        self._copy = mac.copy
        self._fd = fd
        self._seq = 0
        self.broken = False

    def emit(self, kind: str, *fields: str) -> None:
        body = " ".join([str(self._seq), kind, *[str(f).encode("utf-8", "surrogateescape").hex() for f in fields]])
        self._seq += 1
        mac = self._copy()
        mac.update(body.encode("ascii"))
        data = (mac.hexdigest() + " " + body + "\n").encode("ascii")
        try:
            while data:
                data = data[_write(self._fd, data) :]
        except OSError:
            self.broken = True


def _watched(*, classes_only: bool = False) -> dict[str, object]:
    """What a forger patches: module attributes and whole class dictionaries."""
    import builtins

    import _pytest.fixtures as fixtures
    import _pytest.main as main
    import _pytest.nodes as nodes
    import _pytest.outcomes as outcomes
    import _pytest.python as python
    import _pytest.reports as reports
    import _pytest.runner as runner
    import _pytest.skipping as skipping
    import pluggy._callers as callers
    import pluggy._hooks as hooks
    import pluggy._manager as manager
    import pytest

    attributes = {
        builtins: ["__import__", "exit", "quit"],
        sys: ["exit", "excepthook"],
        os: ["_exit", "write", "dup2"],
        pytest: ["skip", "fail", "exit", "xfail", "importorskip", "Function", "Item", "TestReport", "CallInfo"],
        python: ["pytest_pyfunc_call", "pytest_collect_file", "pytest_pycollect_makeitem", "async_fail"],
        runner: [
            "runtestprotocol", "call_and_report", "call_runtest_hook", "check_interactive_exception",
            "pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown",
            "pytest_runtest_makereport", "show_test_item",
        ],
        skipping: ["pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_makereport",
                   "evaluate_skip_marks", "evaluate_xfail_marks"],
        outcomes: ["skip", "fail", "exit", "xfail", "importorskip"],
        main: ["pytest_runtestloop", "pytest_collection"],
        callers: ["_multicall"],
        fixtures: ["fillfixtures"],
    }  # fmt: skip
    classes = [
        python.Function, python.PyobjMixin, python.Module, python.Class, nodes.Item, nodes.Node,
        reports.TestReport, reports.BaseReport, reports.CollectReport, runner.CallInfo, runner.SetupState,
        main.Session, outcomes.OutcomeException, outcomes.Skipped, outcomes.Failed, outcomes.Exit,
        hooks.HookCaller, hooks.HookImpl, manager.PluginManager, fixtures.FixtureRequest, fixtures.FixtureDef,
    ]  # fmt: skip
    watched: dict[str, object] = {}
    for module, names in attributes.items() if not classes_only else ():
        for name in names:
            if name in vars(module):
                watched[f"{module.__name__}.{name}"] = (vars(module), name, vars(module)[name])
    for cls in classes:
        watched[f"{cls.__module__}.{cls.__qualname__}"] = (cls, dict(vars(cls)))
    return watched


def _changed(watched: dict[str, object]) -> list[str]:
    changed = []
    for label, entry in watched.items():
        if len(entry) == 3:  # type: ignore[arg-type]
            namespace, name, value = entry  # type: ignore[misc]
            if namespace.get(name) is not value:
                changed.append(label)
        else:
            cls, before = entry  # type: ignore[misc]
            now = vars(cls)
            names = sorted(
                k for k in now.keys() | before.keys() if now.get(k) is not before.get(k) and k not in PYTEST_SETS
            )
            if names:
                changed.append(f"{label} ({', '.join(names)})")
    return changed


PYTEST_SETS = frozenset({"_pytest_diamond_inheritance_warning_shown"})
"""Class attributes pytest itself sets while it runs."""

HOOKS = (
    "pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown",
    "pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_pyfunc_call", "pytest_report_teststatus",
    "pytest_collection_modifyitems", "pytest_collection_finish", "pytest_collectreport", "pytest_runtestloop",
    "pytest_sessionfinish", "pytest_itemcollected", "pytest_deselected",
)  # fmt: skip


class Guard:
    """The report plugin (see the module's docstring)."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.watched = _watched()
        self.hooks: dict[str, object] = {}
        self.flags: list[str] = []
        self.phases: dict[str, dict[str, object]] = {}
        self.returned: set[str] = set()
        self.wrapped: set[str] = set()
        self.reported: set[str] = set()
        self.collect_errors: list[str] = []
        self.pluginmanager = None
        channel.emit("start", f"{sys.version_info[0]}.{sys.version_info[1]}")

    # --- checks ---------------------------------------------------------------------------

    def _hook_table(self) -> dict[str, object]:
        pm = self.pluginmanager
        table: dict[str, object] = {}
        for name in HOOKS:
            caller = getattr(pm.hook, name, None)
            impls = caller.get_hookimpls() if caller is not None else []
            table[name] = (caller, tuple((impl.plugin_name, impl.function) for impl in impls))
        return table

    def check(self, where: str, *, classes: bool = True) -> None:
        watched = self.watched if classes else {k: v for k, v in self.watched.items() if len(v) == 3}  # type: ignore[arg-type]
        found = [f"{label} was replaced" for label in _changed(watched)]
        if self.pluginmanager is not None:
            if not self.pluginmanager.is_registered(self):
                found.append("the report plugin was unregistered")
            now = self._hook_table()
            for name, (caller, impls) in self.hooks.items():  # type: ignore[misc]
                if now[name][0] is not caller or now[name][1] != impls:  # type: ignore[index]
                    found.append(f"the {name} hook implementations changed")
        for reason in found:
            if reason not in self.flags:
                self.flags.append(reason)
                self.channel.emit("tamper", f"{reason} ({where})")

    # --- hooks ----------------------------------------------------------------------------

    def pytest_collection(self, session) -> None:  # type: ignore[no-untyped-def]
        """Called first (marked in `main`), before pytest imports any test module: pytest has
        configured itself (its `legacypath` plugin adds `Node.fspath` and such) and registered
        its session plugins, so the classes and hooks are snapshot again here."""
        self.check("while pytest configured itself", classes=False)
        self.watched = {**self.watched, **_watched(classes_only=True)}
        self.pluginmanager = session.config.pluginmanager
        self.hooks = self._hook_table()

    def pytest_sessionfinish(self, session) -> None:  # type: ignore[no-untyped-def]
        self.check("at the end of the session")  # before pytest unconfigures (and undoes legacypath)

    def pytest_collectreport(self, report) -> None:  # type: ignore[no-untyped-def]
        if report.failed:
            self.collect_errors.append(report.nodeid)

    def pytest_collection_finish(self, session) -> None:  # type: ignore[no-untyped-def]
        self.check("after collection")
        self.channel.emit("collected", *[item.nodeid for item in session.items])
        self.channel.emit("collect_errors", *self.collect_errors)

    def pytest_runtest_setup(self, item):  # type: ignore[no-untyped-def]
        """A new-style hook wrapper (marked in `main`): once fixtures are set up, witness the body."""
        result = yield
        self._witness(item)
        return result

    def _witness(self, item) -> None:  # type: ignore[no-untyped-def]
        import _pytest.python

        if type(item) is not _pytest.python.Function:
            return
        original = item.obj
        if not callable(original):
            return
        nodeid = item.nodeid
        returned = self.returned

        def witnessed(*args, **kwargs):  # type: ignore[no-untyped-def]
            result = original(*args, **kwargs)
            returned.add(nodeid)
            return result

        witnessed.__wrapped__ = original  # type: ignore[attr-defined]  # tracebacks point at the test
        witnessed.__name__ = getattr(original, "__name__", "test")
        item.obj = witnessed
        self.wrapped.add(nodeid)

    def pytest_runtest_logreport(self, report) -> None:  # type: ignore[no-untyped-def]
        phases = self.phases.setdefault(report.nodeid, {})
        phases[report.when] = ("xfail" if hasattr(report, "wasxfail") else report.outcome, report.when)
        if report.when != "teardown":
            return
        self.check(f"after {report.nodeid}")
        outcome, detail = self._outcome(report.nodeid, phases)
        if report.nodeid in self.reported:
            self.flags.append(f"{report.nodeid} was reported twice")
            self.channel.emit("tamper", f"{report.nodeid} was reported twice")
        self.reported.add(report.nodeid)
        self.channel.emit("test", report.nodeid, outcome, detail)

    def _outcome(self, nodeid: str, phases: dict[str, object]) -> tuple[str, str]:
        setup = phases.get("setup", ("missing", ""))[0]  # type: ignore[index]
        call = phases.get("call", ("missing", ""))[0]  # type: ignore[index]
        teardown = phases.get("teardown", ("missing", ""))[0]  # type: ignore[index]
        if setup == "failed" or teardown == "failed":
            return "error", f"setup {setup}, teardown {teardown}"
        if setup in ("skipped", "xfail") or call in ("skipped", "xfail"):
            return "skipped", f"setup {setup}, call {call}"
        if call == "failed":
            return "failed", ""
        if call != "passed":
            return "not run", f"no call phase (setup {setup})"
        if nodeid not in self.wrapped:
            return "not run", "not a plain test function: its body could not be witnessed"
        if nodeid not in self.returned:
            return "not run", "reported passed, but its body never ran to the end"
        return "passed", ""


def main() -> None:
    key = _read_key()
    report_fd = os.dup(1)  # the report channel (not inherited by children)
    os.dup2(2, 1)  # the tests' stdout goes to stderr
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    site_dir, repo, ini, *test_files = sys.argv[1:]
    for name in [n for n in os.environ if n.startswith(("PYTEST_", "PY_COLORS"))]:
        del os.environ[name]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    sys.path[:] = [p for p in sys.path if p and os.path.isabs(p)] + [site_dir]
    channel = Channel(key, report_fd)
    del key
    import pytest

    pytest.hookimpl(wrapper=True)(Guard.pytest_runtest_setup)
    pytest.hookimpl(tryfirst=True)(Guard.pytest_collection)
    guard = Guard(channel)
    sys.path.append(repo)  # only now can repository code be imported
    args = [
        "-c", ini, "--rootdir", repo, "--confcutdir", repo, "--noconftest", "-p", "no:cacheprovider",
        "--continue-on-collection-errors", "-q", "--no-header", "-rfE", "-o", "addopts=", *test_files,
    ]  # fmt: skip
    code: object = "missing"
    try:
        code = int(pytest.main(args, plugins=[guard]))
    except BaseException as e:
        channel.emit("tamper", f"pytest did not return normally: {type(e).__name__}: {e}"[:500])
    guard.check("after pytest returned", classes=False)
    if not guard.wrapped and guard.reported:
        channel.emit("tamper", "no test function was witnessed")
    channel.emit("end", str(code))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    _exit(0)  # no atexit handler of the repository's runs after the end record


if __name__ == "__main__":
    main()
