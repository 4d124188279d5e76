"""`openenv validate`: the static checks on broken folders, the runtime checks against real
servers (ours served by `openenv serve` in a subprocess, and OpenEnv's own), and the CLI's
usage errors and exit codes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openenv_reference import OPENENV_PYTHON, require
from typer.testing import CliRunner

from openenv_sdk.checks import (
    CheckResult,
    EnvFolder,
    ValidationReport,
    run_static_checks,
    sample_from_schema,
    validate_path,
    validate_url,
)
from openenv_sdk.checks._sample import SampleError
from openenv_sdk.cli.main import app

REPO = Path(__file__).resolve().parents[2]
ECHO_DIR = REPO / "environments" / "echo"
WORDLE_DIR = REPO / "environments" / "wordle"
REFERENCE_SERVER = REPO / "tests" / "conformance" / "openenv_reference_server.py"

MANIFEST = """\
spec_version: 1
name: probe
version: 0.1.0
type: space
runtime: fastapi
port: 8000
environment: probe_env:ProbeEnvironment
"""

GOOD_ENV = '''\
from typing import Any

from openenv_sdk import Action, Environment, Observation, State, tool


class ProbeAction(Action):
    message: str


class ProbeObservation(Observation):
    echoed: str = ""


class ProbeEnvironment(Environment[ProbeAction, ProbeObservation, State]):
    """Echoes."""

    def reset(self, seed: int | None = None, episode_id: str | None = None, **task: Any) -> ProbeObservation:
        return ProbeObservation(echoed="ready")

    def step(self, action: ProbeAction) -> ProbeObservation:
        return ProbeObservation(echoed=action.message)

    @tool
    def say(self, message: str) -> str:
        """Say something.

        Args:
            message: what to say.
        """
        return message
'''

runner = CliRunner()


def make_env(root: Path, *, source: str = GOOD_ENV, manifest: str = MANIFEST, readme: bool = True,
             files: dict[str, str] | None = None) -> Path:
    """An environment folder: `probe_env.py` with `source`, `openenv.yaml`, and more files."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "openenv.yaml").write_text(manifest)
    (root / "probe_env.py").write_text(textwrap.dedent(source))
    if readme:
        (root / "README.md").write_text("# probe\n")
    for name, text in (files or {}).items():
        (root / name).write_text(textwrap.dedent(text))
    return root


def static(path: Path) -> dict[str, CheckResult]:
    with EnvFolder(path) as env:
        return {result.name: result for result in run_static_checks(env)}


def statuses(report: ValidationReport) -> dict[str, str]:
    return {check.name: check.status for check in report.checks}


def flat(text: str) -> str:
    return " ".join(text.split())


# --- schema sampling ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "object", "properties": {"m": {"type": "string"}}, "required": ["m"]}, {"m": "hello"}),
        ({"type": "object", "properties": {"m": {"type": "string"}}}, {}),
        ({"type": "string", "minLength": 8}, "helloxxx"),
        ({"type": "string", "maxLength": 2}, "he"),
        ({"type": "integer", "minimum": 3, "maximum": 9}, 3),
        ({"type": "number", "exclusiveMaximum": -1}, -2.0),
        ({"anyOf": [{"type": "null"}, {"type": "boolean"}]}, False),
        ({"enum": ["a", "b"]}, "a"),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, [0, 0]),
        (
            {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "required": ["p"],
             "$defs": {"P": {"type": "object", "properties": {"x": {"const": 7}}, "required": ["x"]}}},
            {"p": {"x": 7}},
        ),
    ],
)
def test_sample_from_schema_makes_a_minimal_valid_value(schema: dict, expected: object) -> None:
    assert sample_from_schema(schema) == expected


def test_sample_from_schema_refuses_patterns() -> None:
    with pytest.raises(SampleError, match="pattern"):
        sample_from_schema({"type": "string", "pattern": "^[a-z]+$"})


# --- static checks ------------------------------------------------------------------------


@pytest.mark.parametrize("folder", [ECHO_DIR, WORDLE_DIR], ids=["echo", "wordle"])
def test_shipped_environments_pass_every_static_check(folder: Path) -> None:
    results = static(folder)
    assert [r.name for r in results.values() if r.fatal] == []
    assert results["environment.import"].passed and results["tools.schemas"].passed


def test_wordle_grader_is_recognised_as_a_grader_class() -> None:
    assert static(WORDLE_DIR)["grader"].message == "grader:WordleGrader is a Grader class"


def test_missing_manifest_fails_with_the_fix(tmp_path: Path) -> None:
    result = static(tmp_path)["layout.manifest"]
    assert not result.passed and result.message == f"no openenv.yaml in {tmp_path}"
    assert result.fix is not None and "openenv init NAME" in result.fix
    assert static(tmp_path)["manifest.schema"].skipped


def test_missing_readme_is_only_a_warning(tmp_path: Path) -> None:
    report = validate_path(make_env(tmp_path / "e", readme=False), runtime=False)
    assert statuses(report)["layout.readme"] == "warn"
    assert report.passed


def test_unknown_manifest_key_is_a_warning_with_did_you_mean(tmp_path: Path) -> None:
    folder = make_env(tmp_path / "e", manifest=MANIFEST + "graderr: grader:G\n")
    [warning] = [r for r in static(folder).values() if r.name == "manifest.warnings"]
    assert warning.status == "warn"
    assert warning.message == "unknown key 'graderr' is ignored. Did you mean 'grader'?"


def test_wrongly_typed_manifest_field_fails(tmp_path: Path) -> None:
    folder = make_env(tmp_path / "e", manifest=MANIFEST.replace("port: 8000", "port: eighty"))
    results = static(folder)
    assert results["manifest.schema"].status == "fail"
    assert "port: Input should be a valid integer" in results["manifest.schema"].message
    assert results["environment.import"].skipped


def test_manifest_naming_nothing_to_serve_fails(tmp_path: Path) -> None:
    folder = make_env(tmp_path / "e", manifest="name: probe\n")
    result = static(folder)["environment.declared"]
    assert result.status == "fail" and result.message == "the manifest names nothing to serve"


def test_class_that_does_not_import_fails_with_the_reason(tmp_path: Path) -> None:
    folder = make_env(tmp_path / "e", source="import no_such_module_xyz\n")
    result = static(folder)["environment.import"]
    assert result.status == "fail"
    assert "No module named 'no_such_module_xyz'" in result.message


def test_class_that_is_not_an_environment_fails(tmp_path: Path) -> None:
    folder = make_env(tmp_path / "e", source="class ProbeEnvironment:\n    pass\n")
    result = static(folder)["environment.subclass"]
    assert result.status == "fail" and "is not an openenv_sdk.Environment subclass" in result.message


def test_reserved_tool_name_fails_its_own_check(tmp_path: Path) -> None:
    source = GOOD_ENV.replace("def say(self, message: str) -> str:", "def close(self, message: str) -> str:")
    results = static(make_env(tmp_path / "e", source=source))
    assert results["tools.reserved_names"].status == "fail"
    assert results["tools.reserved_names"].message == (
        "a tool is named 'close', a reserved name (reset, step, state, close)"
    )
    assert results["environment.import"].status == "fail"


def test_no_step_and_no_tools_fails(tmp_path: Path) -> None:
    source = "from openenv_sdk import Environment\n\nclass ProbeEnvironment(Environment):\n    '''Does nothing.'''\n"
    result = static(make_env(tmp_path / "e", source=source))["environment.step"]
    assert result.status == "fail"
    assert result.fix == "Implement step(self, action), or mark the agent's tools with @tool"


def test_tool_without_description_is_a_warning(tmp_path: Path) -> None:
    source = GOOD_ENV.replace('        """Say something.\n\n        Args:\n            message: what to say.\n        """\n', "")
    result = static(make_env(tmp_path / "e", source=source))["tools.descriptions"]
    assert result.status == "warn" and result.message == "tool(s) without a description: say"


@pytest.mark.parametrize(
    ("grader_source", "ref", "status", "message"),
    [
        (("from openenv_sdk.rubric import Grader, reward\n\nclass G(Grader):\n    @reward\n"
          "    def solved(self, state):\n        return 1.0\n"), "g:G", "pass", "g:G is a Grader class"),
        ("def score(state):\n    return 1.0\n", "g:score", "pass", "g:score is a reward function of (state)"),
        ("from openenv_sdk.rubric import EnvReward\n\nR = EnvReward()\n", "g:R", "pass", "g:R is a Rubric (EnvReward)"),
        ("from openenv_sdk.rubric import Grader\n\nclass G(Grader):\n    pass\n", "g:G", "fail",
         "G(): G has no @reward methods"),
        ("class G:\n    pass\n", "g:G", "fail", "g:G is the class G, not a Rubric"),
        ("G = 3\n", "g:G", "fail", "g:G is a int, not a Rubric or a callable"),
    ],
    ids=["grader-class", "function", "rubric-instance", "no-rewards", "plain-class", "not-callable"],
)
def test_grader_check(tmp_path: Path, grader_source: str, ref: str, status: str, message: str) -> None:
    folder = make_env(tmp_path / "e", manifest=MANIFEST + f"grader: {ref}\n", files={"g.py": grader_source})
    result = static(folder)["grader"]
    assert (result.status, result.message) == (status, message)


def test_same_module_name_in_two_folders_is_imported_from_each(tmp_path: Path) -> None:
    first = make_env(tmp_path / "a")
    second = make_env(tmp_path / "b", source="class ProbeEnvironment:\n    pass\n")
    assert static(first)["environment.subclass"].passed
    assert static(second)["environment.subclass"].status == "fail"
    assert static(first)["environment.subclass"].passed


# --- runtime checks -----------------------------------------------------------------------


@pytest.mark.parametrize("folder", [ECHO_DIR, WORDLE_DIR], ids=["echo", "wordle"])
def test_shipped_environments_pass_static_and_runtime_checks(folder: Path) -> None:
    report = validate_path(folder, startup_timeout_s=60)
    assert report.passed, [c for c in report.checks if c.fatal]
    found = statuses(report)
    for name in ("server.start", "http.health", "http.schema", "ws.reset", "ws.step", "ws.state",
                 "ws.invalid_action", "ws.close", "mcp.tools_list", "ext.mcp_client", "ext.ws_request_id"):
        assert found[name] == "pass", name


def test_a_failing_reset_is_reported_and_the_server_is_stopped(tmp_path: Path) -> None:
    source = GOOD_ENV.replace('        return ProbeObservation(echoed="ready")', '        raise RuntimeError("no task data")')
    folder = make_env(tmp_path / "e", source=source)
    seen: list[str] = []
    report = validate_path(folder, startup_timeout_s=60, on_result=lambda r: seen.append(r.message))
    reset = next(c for c in report.checks if c.name == "ws.reset")
    assert reset.status == "fail" and reset.message.startswith("reset failed: [EXECUTION_ERROR]")
    assert not report.passed
    url = next(c for c in report.checks if c.name == "server.start").message.rsplit(" ", 1)[-1]
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health", timeout=2)
    assert len(seen) == len(report.checks)


def test_a_server_that_cannot_start_is_reported_with_its_output(tmp_path: Path) -> None:
    folder = make_env(tmp_path / "e", manifest="name: probe\napp: probe_env:app\n",
                      source="raise RuntimeError('no GPU here')\n")
    report = validate_path(folder, startup_timeout_s=30)
    start = next(c for c in report.checks if c.name == "server.start")
    # the LocalProcessProvider's own error: validate serves folders as everything else does
    assert start.status == "fail"
    assert start.message.startswith(f"openenv serve {folder.resolve()} exited with code 1 before it became healthy")
    assert "no GPU here" in start.message
    assert start.fix == f"Run `openenv serve {folder}` to see the server's own error"


def test_url_against_our_server_in_a_thread(echo_server: str) -> None:
    report = validate_url(echo_server)
    assert report.passed and set(statuses(report).values()) == {"pass"}


def test_url_with_nothing_listening_fails_health_and_skips_the_rest() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    report = validate_url(f"http://127.0.0.1:{port}", timeout_s=2)
    found = statuses(report)
    assert found["http.health"] == "fail"
    assert {s for n, s in found.items() if n != "http.health"} == {"skip"}
    assert not report.passed


@pytest.fixture(scope="module")
def openenv_reference_server() -> Iterator[str]:
    """An echo environment served by OpenEnv's own create_app, in OpenEnv's interpreter."""
    require(OPENENV_PYTHON)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([str(OPENENV_PYTHON), str(REFERENCE_SERVER), "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"OpenEnv's reference server did not start: {process.stderr.read() if process.stderr else ''}")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


def test_url_passes_against_openenv_server_with_extensions_reported(openenv_reference_server: str) -> None:
    report = validate_url(openenv_reference_server)
    found = statuses(report)
    assert report.passed
    assert found["ext.mcp_client"] == "unsupported" and found["ext.ws_request_id"] == "unsupported"
    assert {s for n, s in found.items() if not n.startswith("ext.")} == {"pass"}


def test_cli_url_against_openenv_server_exits_0_and_marks_extensions(openenv_reference_server: str) -> None:
    result = runner.invoke(app, ["validate", "--url", openenv_reference_server])
    assert result.exit_code == 0, result.output
    text = flat(result.stdout)
    assert "○ ext.mcp_client" in text and "(extension: not required)" in text
    assert "PASS 10 passed, 3 extension(s) not offered" in text  # request ids, the MCP client, checkpoints


# --- the command --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["validate"], ["validate", str(ECHO_DIR), "--url", "http://127.0.0.1:1"],
     ["validate", "--url", "http://127.0.0.1:1", "--image", "x:latest"]],
    ids=["none", "path-and-url", "url-and-image"],
)
def test_zero_or_several_targets_is_bad_usage(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "Error: give exactly one of PATH, --url or --image" in flat(result.stderr)


def test_url_must_be_http() -> None:
    result = runner.invoke(app, ["validate", "--url", "localhost:8000"])
    assert result.exit_code == 2 and "--url must be an http(s) URL" in flat(result.stderr)


def test_static_only_needs_a_path() -> None:
    result = runner.invoke(app, ["validate", "--url", "http://127.0.0.1:1", "--static-only"])
    assert result.exit_code == 2 and "--static-only applies to PATH only" in flat(result.stderr)


def test_json_report_of_a_passing_folder() -> None:
    result = runner.invoke(app, ["validate", str(ECHO_DIR), "--static-only", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["passed"] is True and report["kind"] == "path"
    assert report["checks"][0] == {"name": "layout.manifest", "passed": True, "message": "openenv.yaml found",
                                   "fix": None, "severity": "error", "skipped": False, "status": "pass"}
    assert report["summary"]["fail"] == 0


def test_failing_folder_exits_1_with_reason_and_fix(tmp_path: Path) -> None:
    folder = make_env(tmp_path / "e", source="import no_such_module_xyz\n")
    result = runner.invoke(app, ["validate", str(folder), "--static-only"])
    assert result.exit_code == 1
    text = flat(result.stdout)
    assert "✗ environment.import" in text and "No module named 'no_such_module_xyz'" in text
    assert "fix: Make `probe_env:ProbeEnvironment` importable" in text
    assert "FAIL" in text


def test_quiet_format_prints_nothing(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(make_env(tmp_path / "e")), "--static-only", "--format", "quiet"])
    assert result.exit_code == 0 and result.stdout == ""


@pytest.mark.skipif(os.environ.get("OPENENV_TEST_CONTAINERS") != "1",
                    reason="needs a container engine: set OPENENV_TEST_CONTAINERS=1")
def test_image_of_the_echo_environment_passes(tmp_path: Path) -> None:
    base = os.environ.get("OPENENV_BASE_IMAGE", "localhost/openenv-base:bookworm")
    built = runner.invoke(app, ["build", str(ECHO_DIR), "--tag", "openenv-test-validate-echo:latest",
                                "--base-image", base, "--log", "quiet"])
    assert built.exit_code == 0, built.output
    result = runner.invoke(app, ["validate", "--image", "openenv-test-validate-echo:latest", "--json",
                                 "--startup-timeout-s", "90"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {c["name"]: c["status"] for c in report["checks"]}["ws.step"] == "pass"


def test_missing_image_is_a_failed_start_not_a_crash() -> None:
    if os.environ.get("OPENENV_TEST_CONTAINERS") != "1":
        pytest.skip("needs a container engine: set OPENENV_TEST_CONTAINERS=1")
    result = runner.invoke(app, ["validate", "--image", "openenv-no-such-image:nope", "--json"])
    assert result.exit_code == 1
    [start] = json.loads(result.stdout)["checks"]
    assert start["name"] == "server.start" and "not found" in start["message"]
