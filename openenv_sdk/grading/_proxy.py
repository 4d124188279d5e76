"""The trusted end: proxies of remote objects, local stand-ins of the solution's classes, and the
codec hooks that build them from (hostile) replies.

Nothing here executes what the worker sends: a reply becomes plain values, proxies (whose every use
is another bounded request) and classes made with `type()` from a name and builtin bases.
"""

from __future__ import annotations

import builtins
import collections
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openenv_sdk.grading._codec import CodecError, Limits, check_text
from openenv_sdk.grading._errors import RemoteError

if TYPE_CHECKING:
    from openenv_sdk.grading.remote import RemoteSession

MAX_MIRRORS = 1000
"""Most local stand-in classes (of values, exceptions, proxies) one process makes."""
MAX_PATH = 32

_BLOCKED_PREFIXES = ("__", "_pytest")
VALUE_BASES: dict[str, type] = {
    "str": str,
    "int": int,
    "float": float,
    "tuple": tuple,
    "list": list,
    "dict": dict,
    "set": set,
    "frozenset": frozenset,
    "bytes": bytes,
}
_KNOWN_VALUE_CLASSES: dict[tuple[str, str], Callable[[Any], Any]] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "Counter"): collections.Counter,
    ("collections", "defaultdict"): lambda value: collections.defaultdict(None, value),
}
"""Standard-library subclasses of values rebuilt as themselves (a defaultdict loses its factory)."""

# --- remote objects ------------------------------------------------------------------------------


class TypeInfo:
    """What the worker said about the type of a remote object."""

    __slots__ = ("callable", "methods", "module", "qualname")

    def __init__(self, module: str, qualname: str, callable_: bool, methods: frozenset[str]) -> None:
        self.module = module
        self.qualname = qualname
        self.callable = callable_
        self.methods = methods


class RemoteObject:
    """A proxy of an object that lives in the worker (an instance of the solution's class, a
    function, a generator...). Attribute reads, method calls and the builtin operations (`len`,
    `in`, iteration, indexing, `repr`, `str`, `bool`) are requests to the worker.

    `==` and `!=` with a local value are never asked of the worker (an object whose `__eq__` says
    yes to everything cannot pass `assert f(x) == expected`). Between two remote objects they are
    identity (two proxies of one remote object are one proxy), and `hash()` too, unless the
    session was made with `remote_equality=True`: then the solution's `__eq__`, `__ne__` and
    `__hash__` answer (a bool and an int, checked), as tests of a library's value classes need
    (`Version.parse("1.0.0+a") == Version.parse("1.0.0+b")`). Ordering is asked of the worker
    only between two remote objects. A proxy of a class answers `isinstance(x, Cls)` and
    `issubclass(Sub, Cls)` in the worker.
    """

    __slots__ = ("__weakref__", "_remote_info", "_remote_ref", "_remote_session")

    _remote_session: RemoteSession
    _remote_ref: tuple[Any, ...]
    _remote_info: TypeInfo

    def __init__(self, session: RemoteSession, ref: tuple[Any, ...], info: TypeInfo) -> None:
        object.__setattr__(self, "_remote_session", session)
        object.__setattr__(self, "_remote_ref", ref)
        object.__setattr__(self, "_remote_info", info)

    def __del__(self) -> None:
        ref = self._remote_ref
        if ref[0] == "o":
            self._remote_session._release(ref)

    def _remote(self, name: str | None, *args: Any, **kwargs: Any) -> Any:
        return self._remote_session.call(self._remote_ref, name, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith(_BLOCKED_PREFIXES):
            raise AttributeError(name)
        if name in self._remote_info.methods:
            return RemoteMethod(self, name)
        return self._remote_session.get(self._remote_ref, name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._remote("__setattr__", name, value)

    def __delattr__(self, name: str) -> None:
        self._remote("__delattr__", name)

    def __dir__(self) -> list[str]:
        return sorted(self._remote_info.methods)

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a remote object cannot be copied or pickled")

    def __len__(self) -> int:
        return _checked(self._remote("__len__"), int, "__len__")

    def __contains__(self, item: Any) -> bool:
        return bool(self._remote("__contains__", item))

    def __iter__(self) -> Any:
        return iter(_checked(self._remote("__iter__"), list, "__iter__"))

    def __reversed__(self) -> Any:
        return iter(_checked(self._remote("__reversed__"), list, "__reversed__"))

    def __next__(self) -> Any:
        return self._remote("__next__")

    def __getitem__(self, key: Any) -> Any:
        return self._remote("__getitem__", key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._remote("__setitem__", key, value)

    def __delitem__(self, key: Any) -> None:
        self._remote("__delitem__", key)

    def __repr__(self) -> str:
        return _checked(self._remote("__repr__"), str, "__repr__")

    def __str__(self) -> str:
        return _checked(self._remote("__str__"), str, "__str__")

    def __bool__(self) -> bool:
        return _checked(self._remote("__bool__"), bool, "__bool__")

    def __hash__(self) -> int:
        if self._remote_session.remote_equality:
            return int(_checked(self._remote("__hash__"), int, "__hash__"))
        return object.__hash__(self)

    def _compare(self, name: str, other: Any) -> Any:
        if isinstance(other, RemoteObject) and other._remote_session is self._remote_session:
            return self._remote(name, other)
        return NotImplemented

    def _equality(self, name: str, other: object) -> Any:
        if (
            isinstance(other, RemoteObject)
            and other._remote_session is self._remote_session
            and self._remote_session.remote_equality
        ):
            answer = self._remote(name, other)
            return answer if type(answer) is bool else bool(answer)
        return NotImplemented

    def __eq__(self, other: object) -> Any:
        return True if other is self else self._equality("__eq__", other)

    def __ne__(self, other: object) -> Any:
        return False if other is self else self._equality("__ne__", other)

    def __instancecheck__(self, instance: Any) -> bool:
        return _checked(self._remote("__instancecheck__", instance), bool, "isinstance()")

    def __subclasscheck__(self, subclass: Any) -> bool:
        return _checked(self._remote("__subclasscheck__", subclass), bool, "issubclass()")

    def __lt__(self, other: Any) -> Any:
        return self._compare("__lt__", other)

    def __le__(self, other: Any) -> Any:
        return self._compare("__le__", other)

    def __gt__(self, other: Any) -> Any:
        return self._compare("__gt__", other)

    def __ge__(self, other: Any) -> Any:
        return self._compare("__ge__", other)


class RemoteCallable(RemoteObject):
    """A proxy of a callable remote object (a function, a class, a bound method): `callable()` is true."""

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._remote_session.call(self._remote_ref, None, args, kwargs)


class RemoteMethod:
    """A method of a remote object, called in one request (no attribute read first)."""

    __slots__ = ("name", "owner")

    def __init__(self, owner: RemoteObject, name: str) -> None:
        self.owner = owner
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.owner._remote_session.call(self.owner._remote_ref, self.name, args, kwargs)

    def __repr__(self) -> str:
        return f"<remote method {self.owner._remote_info.qualname}.{self.name}>"


def _checked(value: Any, kind: type, what: str) -> Any:
    if type(value) is not kind:
        raise TypeError(f"{what} of a remote object returned {type(value).__name__}, not {kind.__name__}")
    return value


class RemoteModule(types.ModuleType):
    """A module of the solution, served by the worker: `from solution import f`, `solution.f(...)`.

    Functions and classes read from it are cached (they are references by name, looked up again in
    the worker at each call); constants are read afresh each time.
    """

    def __init__(self, name: str, session: RemoteSession) -> None:
        super().__init__(name, f"the solution's module {name!r}, served by a worker process")
        self.__dict__["_remote_session"] = session
        self.__dict__["__path__"] = []  # a package to the import system: `import pkg.sub` asks the worker

    def __getattr__(self, name: str) -> Any:
        if name.startswith(_BLOCKED_PREFIXES) and name != "__all__":
            raise AttributeError(name)
        session: RemoteSession = self.__dict__["_remote_session"]
        value = session.get(("p", (self.__name__,)), name)
        if isinstance(value, RemoteObject) or isinstance(value, type):
            self.__dict__[name] = value
        return value

    def __repr__(self) -> str:
        return f"<remote module {self.__name__!r}>"


class RemoteValue:
    """Mixin of the local stand-in of a value subclass of the solution's that has methods of its own
    (`class Config(dict)` with `getint`): the value is a local copy (so `==`, `len`, iteration and
    the base's operations are the builtin's, computed here), the class's own methods and attributes
    are requests to the worker's object. A method that changes the object updates the copy.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        state = _value_state(self)
        if state is None or name.startswith(_BLOCKED_PREFIXES):
            raise AttributeError(name)
        session, ref, _ = state
        return session.get(ref, name)

    def __del__(self) -> None:
        state = _value_state(self)
        if state is not None and state[1][0] == "o":
            state[0]._release(state[1])

    def __reduce_ex__(self, protocol: Any) -> Any:
        base = next(b for b in type(self).__mro__ if b in VALUE_BASES.values())
        return (base, (plain(self, base.__name__),))


def _value_state(value: Any) -> tuple[RemoteSession, tuple[Any, ...], Any] | None:
    """(session, ref, the copy as the worker last reported it) of a `RemoteValue`."""
    try:
        state = object.__getattribute__(value, "__dict__").get("_remote_value")
    except AttributeError:
        return None
    return state if type(state) is tuple else None


def set_value_state(value: Any, session: RemoteSession, ref: tuple[Any, ...]) -> None:
    """Attach a `RemoteValue` to its worker object; mutable copies keep what the worker sent."""
    snapshot = plain(value, _base_name(value)) if isinstance(value, (list, dict, set)) else None
    object.__getattribute__(value, "__dict__")["_remote_value"] = (session, ref, snapshot)


def value_state(value: Any) -> tuple[RemoteSession, tuple[Any, ...], Any] | None:
    return _value_state(value) if isinstance(value, RemoteValue) else None


def _base_name(value: Any) -> str:
    for name, base in VALUE_BASES.items():
        if isinstance(value, base):
            return name
    raise TypeError(f"{type(value).__name__} is no value subclass")


class _RemoteValueMethod:
    """A method of a `RemoteValue`'s class, called in the worker on the object's handle."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        state = _value_state(instance)
        if state is None:
            raise AttributeError(self.name)
        session, ref, _ = state
        name = self.name

        def method(*args: Any, **kwargs: Any) -> Any:
            return session.call(ref, name, args, kwargs, owner=instance)

        method.__name__ = name
        return method


# --- local stand-ins of the solution's classes ------------------------------------------------------


class Mirrors:
    """Local classes that stand for the solution's: one per remote class, made once per process."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str, str], type] = {}
        self.remote_values: dict[tuple[str, str, str, frozenset[str]], type] = {}
        self.exceptions: dict[tuple[str, str], type[BaseException]] = {}
        self.proxies: dict[tuple[str, str, bool], type[RemoteObject]] = {}

    def _room(self) -> None:
        if len(self.values) + len(self.remote_values) + len(self.exceptions) + len(self.proxies) >= MAX_MIRRORS:
            raise CodecError(f"the worker named more than {MAX_MIRRORS} distinct classes")

    def value_class(self, module: str, qualname: str, base: str) -> Callable[[Any], Any]:
        """The class of a subclass value: a standard one, or a plain subclass of `base` named like it."""
        known = _KNOWN_VALUE_CLASSES.get((module, qualname))
        if known is not None and base == "dict":
            return known
        key = (module, qualname, base)
        cls = self.values.get(key)
        if cls is None:
            self._room()
            name = qualname.rpartition(".")[2] or "Value"
            namespace = {"__module__": module, "__qualname__": qualname, "__slots__": (), "__remote_class__": key}
            cls = self.values[key] = type(name, (VALUE_BASES[base],), namespace)
        return cls

    def remote_value_class(self, info: TypeInfo, base: str) -> type:
        """The stand-in of a value subclass with methods of its own (see `RemoteValue`)."""
        key = (info.module, info.qualname, base, info.methods)
        cls = self.remote_values.get(key)
        if cls is None:
            self._room()
            name = info.qualname.rpartition(".")[2] or "Value"
            namespace: dict[str, Any] = {
                "__module__": info.module,
                "__qualname__": info.qualname,
                "__remote_class__": (info.module, info.qualname, base),
            }
            for method in info.methods:
                if method.isidentifier() and not method.startswith("__"):
                    namespace[method] = _RemoteValueMethod(method)
            cls = self.remote_values[key] = type(name, (VALUE_BASES[base], RemoteValue), namespace)
        return cls

    def proxy_class(self, info: TypeInfo) -> type[RemoteObject]:
        """A `RemoteObject` subclass named like the remote type (so `type(x).__name__` reads right)."""
        key = (info.module, info.qualname, info.callable)
        cls = self.proxies.get(key)
        if cls is None:
            self._room()
            base = RemoteCallable if info.callable else RemoteObject
            name = info.qualname.rpartition(".")[2] or base.__name__
            namespace = {"__module__": info.module, "__qualname__": info.qualname, "__slots__": ()}
            cls = self.proxies[key] = type(name, (base,), namespace)
        return cls

    def exception_class(self, desc: Any, limits: Limits, depth: int = 0) -> type[BaseException] | None:
        """The local class for an exception class described by the worker: the builtin of that name
        (only `Exception` subclasses), or a stand-in deriving from the stand-ins of its bases and from
        `RemoteError`; None when neither applies (the caller uses `RemoteError`)."""
        if type(desc) is not dict or depth > 16:
            raise CodecError("bad exception class description")
        module = check_text(desc.get("m"), limits, "an exception's module")
        qualname = check_text(desc.get("q"), limits, "an exception's name")
        if module == "builtins":
            cls = vars(builtins).get(qualname)
            if (
                isinstance(cls, type)
                and issubclass(cls, Exception)
                and not issubclass(cls, BaseExceptionGroup)
            ):
                return cls
            return None
        key = (module, qualname)
        cls = self.exceptions.get(key)
        if cls is not None:
            return cls
        raw_bases = desc.get("b", [])
        if type(raw_bases) is not list or len(raw_bases) > 8:
            raise CodecError("bad exception bases")
        bases: list[type[BaseException]] = []
        for raw in raw_bases:
            base = self.exception_class(raw, limits, depth + 1)
            if base is not None and base not in bases:
                bases.append(base)
        if not any(issubclass(base, RemoteError) for base in bases):
            bases.append(RemoteError)
        self._room()
        name = qualname.rpartition(".")[2] or "RemoteError"
        namespace = {"__module__": module, "__qualname__": qualname}
        try:
            cls = type(name, tuple(bases), namespace)
        except TypeError:  # bases whose layouts cannot combine
            cls = type(name, (RemoteError,), namespace)
        self.exceptions[key] = cls
        return cls


MIRRORS = Mirrors()


def value_form(value: Any) -> tuple[str, str, str] | None:
    """(module, qualname, base) of an instance of a subclass of a value type; None for others."""
    cls = type(value)
    key = getattr(cls, "__remote_class__", None)
    if type(key) is tuple and len(key) == 3:
        return key
    for name, base in VALUE_BASES.items():
        if isinstance(value, base) and cls is not bool:
            return (str(cls.__module__), str(cls.__qualname__), name)
    return None


def plain(value: Any, base: str) -> Any:
    """The exact-`base` copy of an instance of a subclass of that base."""
    kind: Any = VALUE_BASES[base]
    if kind is dict:
        return dict(dict.items(value))  # the base's own items: a stand-in's `items` may be the solution's
    if kind in (str, int, float):
        return kind.__new__(kind, value) if kind is not str else str.__str__(value)
    return kind(value)


def build_exception(
    err: dict[str, Any], limits: Limits, decode: Callable[[Any], Any]
) -> BaseException:
    """The exception for an error reply of kind "raised" (values decoded with `decode`)."""
    cls = MIRRORS.exception_class(err.get("cls"), limits)
    message = check_text(err.get("msg", ""), limits, "an exception's message")
    type_name = check_text(err.get("type", "?"), limits, "an exception's type")
    remote_tb = err.get("tb", "")
    remote_tb = remote_tb if type(remote_tb) is str else ""
    args = decode(err["args"]) if "args" in err else None
    if type(args) is not tuple:
        args = (message,)
    exc: BaseException
    if cls is None:
        exc = RemoteError(message)
    else:
        try:
            exc = cls(*args)
        except Exception:
            try:
                exc = cls(message)
            except Exception:
                exc = RemoteError(message)
    attrs = decode(err["attrs"]) if "attrs" in err else None
    if type(attrs) is dict:
        for key, value in list(attrs.items())[:64]:
            if type(key) is str and key.isidentifier() and not key.startswith("__") and not hasattr(type(exc), key):
                try:
                    setattr(exc, key, value)
                except (AttributeError, TypeError):
                    pass
    if isinstance(exc, RemoteError):
        desc = err.get("cls") or {}
        exc.type_name = f"{desc.get('m', '?')}.{desc.get('q', type_name)}"
        exc.message = message
        exc.remote_traceback = remote_tb
    if remote_tb:
        exc.add_note("raised in the solution's process:\n" + remote_tb.rstrip())
    return exc
