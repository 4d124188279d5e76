"""Remote grading: the hidden tests run in a trusted process that never imports the solution.

`install_remote_modules(["solution"], directory)` puts proxy modules into `sys.modules`, so that
the tests' `from solution import f` gets a proxy: calling it sends the call to a worker process
that imported the solution's file, and its answer comes back as a value. The solution's code runs
only in the worker; what comes back is decoded with bounds (`Limits`), never unpickled or executed.

    session = install_remote_modules(["solution"], Path("/tmp/run"), timeout_s=10.0)
    from solution import rotate            # a RemoteCallable
    rotate([1, 2, 3], 1)                   # [3, 1, 2], computed in the worker
    session.close()                        # kills the worker, removes the modules

What crosses the boundary:

- values: None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, slice, Decimal,
  date, time, datetime, timedelta; instances of subclasses of the container and scalar types come
  back as instances of local stand-in classes of the same name (with the builtin's behaviour:
  `Symbol("a") == "a"`, `type(x).__name__ == "Symbol"`); where the solution's class has methods
  of its own, they are requests to the worker's object (`RemoteValue`: `Config(dict).getint`);
- other objects (instances of the solution's classes, functions, generators) come back as
  `RemoteObject` proxies: methods, attributes and builtin operations are requests;
- packages: a module named in `modules` may be a package; `import pkg.sub` and
  `from pkg.sub import f` get proxy modules too (an import finder of the session's);
- callables of the trusted side passed as arguments (a test's lambda, a function to decorate)
  become callbacks: when the solution calls one, the worker asks this process, which runs it
  with the decoded arguments (while the worker serves the calls it makes in turn); builtins and
  standard-library types and functions (`int`, `str.lower`, `datetime.date`) and the stand-ins of
  the solution's exception classes are sent by name and are the worker's own;
- exceptions: a builtin `Exception` subclass is raised as itself; the solution's own exception
  classes become local classes of the same name and builtin bases, deriving from `RemoteError`
  (so `pytest.raises(CycleError)` and `pytest.raises(ValueError)` both work); anything else,
  `SystemExit` and `KeyboardInterrupt` included, is a `RemoteError`;
- in-place changes: after each call, a list, dict or set argument that the call changed is
  updated in place on the caller's side (nested containers kept where they were), and a result
  that is one of those arguments is the caller's own object.

Every call has a deadline (`timeout_s`). A call that times out, whose worker dies or whose answer
breaks the format raises a `ChannelError` (`RemoteTimeout`, `WorkerDied`, `ProtocolError`) in
the test; the worker is killed, and the next call starts a fresh one (so one hanging test fails
alone). Remote objects of a killed worker raise `StaleHandle`.
"""

from __future__ import annotations

import collections
import importlib.abc
import importlib.machinery
import itertools
import json
import keyword
import sys
import threading
import time
import types
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from openenv_sdk.errors import ClientStateError
from openenv_sdk.grading._channel import Channel, Spawn, spawn_subprocess
from openenv_sdk.grading._codec import Codec, CodecError, Limits, check_text
from openenv_sdk.grading._errors import (
    NotSendable,
    ProtocolError,
    RemoteTimeout,
    SolutionImportError,
    StaleHandle,
    WorkerDied,
)
from openenv_sdk.grading._proxy import (
    MAX_PATH,
    MIRRORS,
    VALUE_BASES,
    RemoteModule,
    RemoteObject,
    TypeInfo,
    build_exception,
    plain,
    set_value_state,
    value_form,
    value_state,
)
from openenv_sdk.grading._script import worker_script

__all__ = ["DEFAULT_TIMEOUT_S", "RemoteSession", "install_remote_modules"]

DEFAULT_TIMEOUT_S = 10.0
"""Per-call limit, in seconds (a call includes starting the worker and importing the solution)."""
OUTPUT_LIMIT_BYTES = 64 * 1024
PIN_MIN_ITEMS = 1000
"""A list argument this long, of scalars only, is sent once and kept by the worker while unchanged."""
MAX_PINS = 8
_RESERVED = frozenset({"pytest", "_pytest", "pluggy", "openenv_sdk", "conftest", "py"})


class RemoteSession:
    """The trusted end of one solution's worker: starts it, sends calls, decodes answers.

    Usually made by `install_remote_modules`. Thread-safe (calls are serialised); not reusable
    after `close()`.
    """

    def __init__(
        self,
        modules: Iterable[str],
        directory: str | Path,
        *,
        spawn: Spawn = spawn_subprocess,
        python: str = sys.executable,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        limits: Limits | None = None,
        output_limit_bytes: int = OUTPUT_LIMIT_BYTES,
        remote_equality: bool = False,
    ) -> None:
        """Configure the session; the worker starts at the first call.

        Args:
            modules: names of the solution's modules (files `<name>.py` in `directory`).
            directory: the directory holding only the solution's files; the worker's working directory.
            spawn: starts the worker (see `Spawn`): the default runs it as a plain subprocess;
                wrap it to run it in a sandbox (`prefixed_spawn(["bwrap", ...])`).
            python: the interpreter the worker runs with (`-I -S`: standard library only).
            timeout_s: limit of each call, in seconds.
            limits: bounds on every message, both ways (default `Limits()`).
            output_limit_bytes: how much of the solution's latest output (stdout and stderr) is kept.
            remote_equality: let the solution's `__eq__`, `__ne__` and `__hash__` decide `==`,
                `!=` and `hash()` between two of its objects (never against a local value); off,
                they are identity. Turn it on where tests compare instances of the solution's
                classes with each other (a library's value types).

        Raises:
            ValueError: a bad module name, a non-positive timeout.
        """
        self.modules = tuple(_check_module_name(name) for name in modules)
        if not self.modules:
            raise ValueError("modules is empty: name at least one module of the solution")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        self.directory = Path(directory)
        self.timeout_s = float(timeout_s)
        self.limits = limits or Limits()
        self.python = python
        self.remote_equality = bool(remote_equality)
        self._spawn = spawn
        self._output_limit = output_limit_bytes
        self._lock = threading.RLock()
        self._channel: Channel | None = None
        self._generation = 0
        self._types: dict[int, TypeInfo] = {}
        self._proxies: weakref.WeakValueDictionary[int, RemoteObject] = weakref.WeakValueDictionary()
        self._free: set[int] = set()
        self._pins: collections.OrderedDict[int, _Pin] = collections.OrderedDict()
        self._unpin: set[int] = set()
        self._ids = itertools.count(1)
        self._installed: list[str] = []
        self._closed = False
        self._last_output = ""
        self._callbacks: dict[int, Any] = {}
        self._callback_ids: dict[int, int] = {}
        self._callback_errors: dict[int, BaseException] = {}
        self._finder = _RemoteFinder(self)

    # --- lifecycle -----------------------------------------------------------------------

    def install(self) -> RemoteSession:
        """Put a `RemoteModule` for each module into `sys.modules`.

        Raises:
            ValueError: `sys.modules` already holds one of the names.
        """
        taken = [name for name in self.modules if name in sys.modules]
        if taken:
            raise ValueError(f"sys.modules already holds {taken}: the solution's modules must not be imported here")
        for name in self.modules:
            sys.modules[name] = RemoteModule(name, self)
            self._installed.append(name)
        sys.meta_path.insert(0, self._finder)
        return self

    def close(self) -> None:
        """Kill the worker and remove the installed modules. Idempotent."""
        with self._lock:
            self._closed = True
            self._discard()
            for name, module in list(sys.modules.items()):  # ours, submodules included
                if isinstance(module, RemoteModule) and module.__dict__.get("_remote_session") is self:
                    del sys.modules[name]
            self._installed.clear()
            if self._finder in sys.meta_path:
                sys.meta_path.remove(self._finder)

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def output(self) -> str:
        """The tail of what the solution wrote to stdout and stderr (of the current or last worker)."""
        with self._lock:
            return self._channel.output() if self._channel is not None else self._last_output

    @property
    def generation(self) -> int:
        """How many workers this session has started."""
        return self._generation

    def _ensure(self) -> Channel:
        if self._closed:
            raise ClientStateError("this RemoteSession is closed")
        if self._channel is None:
            config = {"modules": list(self.modules), "limits": self.limits.as_dict()}
            argv = [self.python, "-I", "-S", "-c", worker_script(), json.dumps(config)]
            try:
                process = self._spawn(argv, self.directory)
            except OSError as e:
                raise WorkerDied(f"the worker could not start: {e}") from e
            self._generation += 1
            self._types = {}
            self._proxies = weakref.WeakValueDictionary()
            self._free = set()
            self._pins.clear()
            self._unpin.clear()
            self._callbacks.clear()
            self._callback_ids.clear()
            self._callback_errors.clear()
            self._channel = Channel(
                process, max_line_bytes=self.limits.max_message_bytes, output_limit_bytes=self._output_limit
            )
        return self._channel

    def _discard(self) -> None:
        if self._channel is not None:
            channel, self._channel = self._channel, None
            channel.close()
            self._last_output = channel.output()

    def _release(self, ref: tuple[Any, ...]) -> None:
        if ref[1] == self._generation:
            self._free.add(ref[2])

    def serves(self, module: str) -> bool:
        """Whether `module` is one of the solution's modules or a dotted submodule of one."""
        parts = module.split(".")
        return parts[0] in self.modules and all(part.isidentifier() for part in parts) and len(parts) <= MAX_PATH

    # --- calls -----------------------------------------------------------------------------

    def get(self, ref: tuple[Any, ...], name: str) -> Any:
        """The attribute `name` of the remote object `ref` (a value, or a proxy)."""
        with self._lock:
            return self._request({"op": "get", "ref": self._ref_form(ref), "name": name}, ref)

    def call(
        self,
        ref: tuple[Any, ...],
        name: str | None,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        owner: Any = None,
    ) -> Any:
        """Call the remote object `ref` (`name` None), a builtin operation on it (`name` a dunder
        the worker knows) or its method `name`; changed list, dict and set arguments are updated,
        and so is `owner` (the `RemoteValue` whose method this is) when the method changed it."""
        with self._lock:
            self._ensure()
            codec = self._encoder()
            new_pins: list[_Pin] = []
            try:
                message = {
                    "op": "call",
                    "ref": self._ref_form(ref),
                    "name": name,
                    "args": [self._argument_form(codec, arg, new_pins) for arg in args],
                    "kwargs": [x for key, arg in kwargs.items() for x in (key, self._argument_form(codec, arg, new_pins))],
                }
            except CodecError as e:
                raise NotSendable(f"an argument cannot be sent to the solution: {e}") from None
            return self._request(message, ref, args, kwargs, new_pins, owner)

    def _argument_form(self, codec: Codec, value: Any, new_pins: list[_Pin]) -> Any:
        """The JSON form of one argument: a reference to the worker's copy of a long flat list that
        has not changed since it was sent (compared at C speed), else the encoded value."""
        if type(value) is not list or len(value) < PIN_MIN_ITEMS:
            return codec.encode(value)
        pin = self._pins.get(id(value))
        if pin is not None:
            if len(value) == len(pin.snapshot) and value == pin.snapshot:
                self._pins.move_to_end(id(value))
                return {"$": "pin", "id": pin.pin_id}
            del self._pins[id(value)]
            self._unpin.add(pin.pin_id)
        if not codec.is_flat(value):
            return codec.encode(value)
        pin = _Pin(value, next(self._ids))
        new_pins.append(pin)
        return {"$": "pin", "id": pin.pin_id, "v": pin.snapshot}

    def _request(
        self,
        message: dict[str, Any],
        ref: tuple[Any, ...],
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] = {},
        new_pins: Iterable[_Pin] = (),
        owner: Any = None,
    ) -> Any:
        channel = self._ensure()
        generation = self._generation
        if ref[0] == "o" and ref[1] != generation:  # the worker restarted while encoding
            raise StaleHandle("a remote object of a worker that is gone was used")
        message["id"] = rid = next(self._ids)
        if self._free:
            message["free"] = sorted(self._free)
        if self._unpin:
            message["unpin"] = sorted(self._unpin)
        try:
            data = self._encoder().dumps(message)
        except CodecError as e:
            raise NotSendable(f"the call cannot be sent to the solution: {e}") from None
        self._free.clear()
        self._unpin.clear()
        try:
            # the call's time limit counts the worker's time, not our callbacks' (between exchanges)
            budget = self.timeout_s
            started = time.monotonic()
            line = channel.exchange(data, budget)
            while line.startswith(b'{"cb":'):  # the solution calls one of our callables: answer, read on
                budget -= time.monotonic() - started
                answer = self._call_back(line, generation)
                if budget <= 0:
                    raise RemoteTimeout(f"the solution did not answer within {self.timeout_s:g} s (callbacks aside)")
                started = time.monotonic()
                line = channel.exchange(answer, budget)
        except BaseException:  # a timeout, a dead worker, or an interrupt mid-call: the channel is out of step
            if self._channel is channel:
                self._discard()
            raise
        if self._channel is not channel:  # a callback's own call failed and ended this worker
            raise WorkerDied("the worker was ended while a callback ran")
        for pin in new_pins:
            self._pins[id(pin.obj)] = pin
            while len(self._pins) > MAX_PINS:
                _, evicted = self._pins.popitem(last=False)
                self._unpin.add(evicted.pin_id)
        try:
            outcome, value = self._settle(line, rid, generation, args, kwargs, owner)
        except CodecError as e:
            self._discard()
            raise ProtocolError(f"the worker's answer was refused: {e}") from None
        if outcome == "raise":
            raise value
        return value

    def _call_back(self, line: bytes, generation: int) -> bytes:
        """Run the callable a callback request names, and the answer line to send back.

        Its `Exception` goes back to the worker (raised there as the builtin of that name, or
        `RuntimeError`); should the solution let it out, the test gets the very exception. Any
        other `BaseException` (a failed nested call, `pytest.fail`) ends the worker and propagates.
        """
        decoder = _Decoder(self, generation, (), {})
        request = decoder.codec.loads(line)
        if type(request) is not dict:
            raise ProtocolError("a callback request that is not a JSON object")
        key, call = request.get("cb"), request.get("call")
        function = self._callbacks.get(key) if type(key) is int else None
        if function is None or type(call) is not int:
            raise ProtocolError(f"a callback request for unknown callable {key!r}")
        try:
            args = decoder.decode(request.get("args"), aliases=False)
            flat = decoder.decode(request.get("kwargs"), aliases=False)
        except CodecError as e:
            raise ProtocolError(f"a callback request was refused: {e}") from None
        if type(args) is not list or type(flat) is not list or len(flat) % 2 or not all(type(k) is str for k in flat[::2]):
            raise ProtocolError("bad callback arguments")
        try:
            result = function(*args, **dict(zip(flat[::2], flat[1::2])))
            answer: dict[str, Any] = {"cbr": call, "ok": self._encoder().encode(result)}
        except CodecError as e:
            answer = {"cbr": call, "err": {"type": "TypeError", "msg": f"the callback's result cannot be sent: {e}"}}
        except Exception as e:  # the test's own exception: the solution sees it raised
            self._callback_errors[call] = e
            while len(self._callback_errors) > 64:
                self._callback_errors.pop(next(iter(self._callback_errors)))
            message = check_text(str(e)[: self.limits.max_text_chars], self.limits, "a message")
            answer = {"cbr": call, "err": {"type": type(e).__name__, "msg": message}}
        return self._encoder().dumps(answer)

    def _settle(
        self,
        line: bytes,
        rid: int,
        generation: int,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        owner: Any = None,
    ) -> tuple[str, Any]:
        decoder = _Decoder(self, generation, args, kwargs)
        reply = decoder.codec.loads(line)
        if type(reply) is not dict:
            raise CodecError("the reply is not a JSON object")
        if reply.get("id") != rid or type(reply.get("id")) is not int:
            raise CodecError(f"the reply is for request {reply.get('id')!r}, not {rid}")
        mutated = reply.get("mut", [])
        if type(mutated) is not list or len(mutated) > len(args) + len(kwargs):
            raise CodecError("bad 'mut' in the reply")
        for entry in mutated:
            decoder.apply_mutation(entry)
        if "self" in reply and owner is not None:
            decoder.update_owner(owner, reply["self"])
        if "ok" in reply and "err" not in reply:
            return "return", decoder.decode(reply["ok"], aliases=True)
        err = reply.get("err")
        if type(err) is not dict:
            raise CodecError("the reply has neither 'ok' nor 'err'")
        kind = err.get("kind")
        message = check_text(err.get("msg", ""), self.limits, "an error message")
        if kind == "unsendable":
            return "raise", NotSendable(f"the solution's result cannot be sent back: {message}")
        origin = self._callback_errors.get(err.get("callback_call"))  # type: ignore[arg-type]
        if kind == "raised" and origin is not None:
            return "raise", origin
        exc = build_exception(err, self.limits, lambda node: decoder.decode(node, aliases=False))
        if kind == "import":
            module = check_text(err.get("module", "?"), self.limits, "a module name")
            failure = SolutionImportError(f"the solution's module {module!r} failed to import: {err.get('type')}: {message}")
            failure.__cause__ = exc
            return "raise", failure
        if kind != "raised":
            raise CodecError(f"unknown error kind {kind!r}")
        return "raise", exc

    # --- encoding ------------------------------------------------------------------------------

    def _encoder(self) -> Codec:
        return Codec(self.limits, self._encode_other, _no_tags)

    def _ref_form(self, ref: tuple[Any, ...]) -> dict[str, Any]:
        if ref[0] == "p":
            return {"$": "p", "p": list(ref[1])}
        if ref[1] != self._generation or self._channel is None:
            raise StaleHandle(
                "this remote object belonged to a worker that was killed (after a timeout or a crash); "
                "make it again"
            )
        return {"$": "o", "h": ref[2]}

    def _encode_other(self, value: Any, depth: int) -> Any:
        if isinstance(value, RemoteObject):
            if value._remote_session is not self:
                raise CodecError("a remote object of another session")
            return self._ref_form(value._remote_ref)
        state = value_state(value)
        if state is not None and state[0] is self and state[1][1] == self._generation and self._channel is not None:
            snapshot = state[2]
            if snapshot is None or plain(value, type(snapshot).__name__) == snapshot:
                return self._ref_form(state[1])  # the worker's object itself (unchanged here)
        form = value_form(value)
        if form is not None:
            module, qualname, base = form
            codec = self._encoder()
            part = codec.encode_part(plain(value, base), depth + 1)
            return {"$": "v", "base": base, "m": module, "q": qualname, "v": part}
        named = self._global_form(value)
        if named is not None:
            return named
        if callable(value) and not isinstance(value, type):
            return self._callback_form(value)
        raise CodecError(f"a {type(value).__name__} cannot be sent to the solution's process")

    def _global_form(self, value: Any) -> dict[str, Any] | None:
        """A builtin, standard-library or solution's global by name (the worker's own object)."""
        remote_class = getattr(value, "__remote_class__", None) if isinstance(value, type) else None
        if isinstance(value, type) and issubclass(value, BaseException) and value in MIRRORS.exceptions.values():
            return {"$": "g", "m": value.__module__, "q": value.__qualname__}
        if type(remote_class) is tuple and len(remote_class) == 3 and self.serves(str(remote_class[0])):
            return {"$": "g", "m": remote_class[0], "q": remote_class[1]}  # a stand-in of the solution's class
        if remote_class is not None or not isinstance(
            value, (type, types.BuiltinFunctionType, types.FunctionType, types.MethodDescriptorType)
        ):
            return None
        module = getattr(value, "__module__", None) or getattr(getattr(value, "__objclass__", None), "__module__", None)
        qualname = getattr(value, "__qualname__", None)
        if type(module) is not str or type(qualname) is not str:
            return None
        top = module.partition(".")[0]
        if module != "builtins" and top not in sys.stdlib_module_names or top in _RESERVED:
            return None
        target: Any = sys.modules.get(module)
        for part in qualname.split("."):
            target = getattr(target, part, None)
        return {"$": "g", "m": module, "q": qualname} if target is value else None

    def _callback_form(self, function: Any) -> dict[str, Any]:
        key = self._callback_ids.get(id(function))
        if key is None or self._callbacks.get(key) is not function:
            key = next(self._ids)
            self._callbacks[key] = function
            self._callback_ids[id(function)] = key
        name = getattr(function, "__name__", None)
        return {"$": "cb", "id": key, "n": name[:200] if type(name) is str else None}


class _Pin:
    """A long flat list argument the worker keeps: the caller's object and a copy as it was sent."""

    __slots__ = ("obj", "pin_id", "snapshot")

    def __init__(self, obj: list[Any], pin_id: int) -> None:
        self.obj = obj
        self.snapshot = list(obj)
        self.pin_id = pin_id


class _Decoder:
    """Decodes one reply: builds proxies, stand-ins and aliases of the call's arguments."""

    def __init__(self, session: RemoteSession, generation: int, args: tuple[Any, ...], kwargs: Mapping[str, Any]):
        self.session = session
        self.limits = session.limits
        self.generation = generation
        self.args = args
        self.kwargs = kwargs
        self.codec = Codec(self.limits, _no_encode, self._tag)
        self._aliases = False

    def decode(self, node: Any, *, aliases: bool) -> Any:
        self._aliases = aliases
        return self.codec.decode(node)

    def _argument(self, key: Any) -> Any:
        if type(key) is int and 0 <= key < len(self.args):
            return self.args[key]
        if type(key) is str and key in self.kwargs:
            return self.kwargs[key]
        raise CodecError(f"no argument {key!r} in this call")

    def apply_mutation(self, entry: Any) -> None:
        if type(entry) is not list or len(entry) != 2:
            raise CodecError("bad 'mut' entry")
        target = self._argument(entry[0])
        new = self.decode(entry[1], aliases=False)
        if type(target) not in (list, dict, set) or type(new) is not type(target):
            raise CodecError(f"argument {entry[0]!r} cannot become a {type(new).__name__}")
        pin = self.session._pins.pop(id(target), None)
        if pin is not None:  # the worker dropped its copy when it reported the change
            self.session._unpin.add(pin.pin_id)
        _sync(target, new)

    def update_owner(self, owner: Any, node: Any) -> None:
        """A `RemoteValue` whose method changed the worker's object: its copy follows."""
        state = value_state(owner)
        if state is None or not isinstance(owner, (list, dict, set)):
            raise CodecError("'self' in a reply for an object that has no local copy")
        new = self.decode(node, aliases=False)
        base = next(b for b in (list, dict, set) if isinstance(owner, b))
        if type(new) is not base:
            raise CodecError(f"a {base.__name__} subclass cannot become a {type(new).__name__}")
        _sync(owner, new, base)
        set_value_state(owner, state[0], state[1])

    def _tag(self, node: dict[str, Any], depth: int) -> Any:
        tag = node["$"]
        if tag == "o" or tag == "p":
            return self._proxy(node)
        if tag == "v":
            base = node.get("base")
            if base not in VALUE_BASES:
                raise CodecError(f"bad value base {base!r}")
            module = check_text(node.get("m"), self.limits, "a class's module")
            qualname = check_text(node.get("q"), self.limits, "a class's name")
            value = self.codec.decode_part(node.get("v"), depth + 1)
            if type(value) is not VALUE_BASES[base]:
                raise CodecError(f"a {base} subclass value holds a {type(value).__name__}")
            if "h" not in node:
                return MIRRORS.value_class(module, qualname, base)(value)
            handle = node.get("h")
            if type(handle) is not int or handle < 1:
                raise CodecError("bad handle")
            self.session._free.discard(handle)
            mirror = MIRRORS.remote_value_class(self._type(node), base)(value)
            set_value_state(mirror, self.session, ("o", self.generation, handle))
            return mirror
        if tag == "e":
            cls = MIRRORS.exception_class(node.get("c"), self.limits)
            if cls is None:
                raise CodecError("an exception class with no local equivalent")
            return cls
        if tag == "a" and self._aliases:
            return self._argument(node.get("i"))
        raise CodecError(f"unknown tag {tag!r}")

    def _type(self, node: dict[str, Any]) -> TypeInfo:
        tid = node.get("y")
        if type(tid) is not int:
            raise CodecError("a remote object without a type id")
        raw = node.get("t")
        types = self.session._types
        if raw is None:
            if tid not in types:
                raise CodecError(f"unknown remote type id {tid}")
            return types[tid]
        if type(raw) is not dict:
            raise CodecError("bad remote type")
        methods = raw.get("f", [])
        if type(methods) is not list or len(methods) > 1000:
            raise CodecError("bad remote method list")
        info = TypeInfo(
            check_text(raw.get("m"), self.limits, "a type's module"),
            check_text(raw.get("q"), self.limits, "a type's name"),
            raw.get("c") is True,
            frozenset(check_text(m, self.limits, "a method name") for m in methods),
        )
        types.setdefault(tid, info)
        return types[tid]

    def _proxy(self, node: dict[str, Any]) -> RemoteObject:
        info = self._type(node)
        cls = MIRRORS.proxy_class(info)
        session = self.session
        if node["$"] == "p":
            path = node.get("p")
            if (
                type(path) is not list
                or not 2 <= len(path) <= MAX_PATH
                or not all(type(p) is str for p in path)
                or not session.serves(path[0])
                or not all(p.isidentifier() for p in path[1:])
            ):
                raise CodecError(f"bad path reference {path!r}")
            return cls(session, ("p", tuple(path)), info)
        handle = node.get("h")
        if type(handle) is not int or handle < 1:
            raise CodecError("bad handle")
        session._free.discard(handle)
        proxy = session._proxies.get(handle)
        if proxy is None:
            proxy = cls(session, ("o", self.generation, handle), info)
            session._proxies[handle] = proxy
        return proxy


def _sync(target: Any, new: Any, kind: type | None = None) -> None:
    """Make the list, dict or set `target` equal `new`, keeping nested containers where they were.
    `kind`: the base whose own operations are used (for a subclass, whose methods may be the solution's)."""
    kind = kind or type(target)
    if kind is list:
        for i in range(min(list.__len__(target), len(new))):
            list.__setitem__(target, i, _merged(list.__getitem__(target, i), new[i]))
        if len(new) < list.__len__(target):
            list.__delitem__(target, slice(len(new), None))
        else:
            list.extend(target, new[list.__len__(target) :])
    elif kind is dict:
        if list(dict.keys(target)) == list(new):
            for key, value in new.items():
                dict.__setitem__(target, key, _merged(dict.__getitem__(target, key), value))
        else:
            merged = {
                key: _merged(dict.__getitem__(target, key), value) if dict.__contains__(target, key) else value
                for key, value in new.items()
            }
            dict.clear(target)
            dict.update(target, merged)
    else:
        set.clear(target)
        set.update(target, new)


def _merged(old: Any, new: Any) -> Any:
    if type(old) is type(new) and type(old) in (list, dict, set) and old is not new:
        _sync(old, new)
        return old
    return new


class _RemoteFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of a served package's submodules (`import pkg.sub`): proxy modules, checked in the
    worker (a missing one raises `ModuleNotFoundError` here, as a local import would)."""

    def __init__(self, session: RemoteSession) -> None:
        self.session = session

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if "." not in fullname or not self.session.serves(fullname):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        self.session.get(("p", (spec.name,)), "__name__")  # imports it in the worker, or raises
        return RemoteModule(spec.name, self.session)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _no_tags(node: dict[str, Any], depth: int) -> Any:
    raise CodecError(f"unknown tag {node.get('$')!r}")


def _no_encode(value: Any, depth: int) -> Any:
    raise CodecError(f"cannot encode {type(value).__name__}")


def _check_module_name(name: str) -> str:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"{name!r} is not a module name (one identifier, no dots)")
    if name in sys.stdlib_module_names or name in _RESERVED:
        raise ValueError(f"{name!r} would shadow a module the trusted side needs")
    return name


def install_remote_modules(
    modules: Iterable[str],
    directory: str | Path,
    *,
    spawn: Spawn = spawn_subprocess,
    python: str = sys.executable,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    limits: Limits | None = None,
    remote_equality: bool = False,
) -> RemoteSession:
    """Install proxy modules for the solution's `modules` into `sys.modules`; see `RemoteSession`.

    Returns:
        The session (a context manager); `close()` kills the worker and removes the modules.

    Raises:
        ValueError: a bad module name, or one already in `sys.modules`.
    """
    session = RemoteSession(
        modules,
        directory,
        spawn=spawn,
        python=python,
        timeout_s=timeout_s,
        limits=limits,
        remote_equality=remote_equality,
    )
    return session.install()

