"""The worker: imports the solution and answers calls on a private pipe.

Never imported by the trusted side: `_script.py` assembles `_codec.py` and this file into one
script, run as `python3 -I -S -c <script> <config JSON>` in a directory that holds only the
solution. Standard library only.

Before any solution code runs, the worker moves its channel to private file descriptors: fd 0
becomes /dev/null, fd 1 (and `sys.stdout`) point at stderr, so a `print` in the solution lands
in the captured output and cannot corrupt the replies. Code in this process can still find the
private descriptors; that does not matter, since the trusted side takes from this process only
values (decoded with bounds) and exceptions (a name, a message and a class's name and bases):
anything the solution can forge here it could as well return.

Requests, one JSON object per line: {"id": n, "op": ..., "free": [handle ids no longer used]}

    {"op": "get", "ref": REF, "name": str}                         getattr
    {"op": "call", "ref": REF, "name": str | null, "args": [...], "kwargs": [k, v, ...]}
        name null: call the object; a name in DUNDERS: that builtin operation (len, in, iter...);
        else: call the method of that name.

REF is {"$": "p", "p": [module, attr, ...]} (a path from a module, e.g. "pkg" or "pkg.sub": stable
across workers) or {"$": "o", "h": id} (an object this worker returned). Replies, one JSON object
per line:

    {"id": n, "ok": value, "mut": [[arg, value], ...], "self": value}
    {"id": n, "err": {"kind": "raised" | "unsendable" | "import", "type": ..., "cls": ..., ...}}

`mut` holds the new value of each list, dict or set argument that the call changed; a result
that *is* such an argument is sent as {"$": "a", "i": arg}; `self`, the new plain value of a
list, dict or set subclass instance whose method changed it.

Arguments may be callbacks, {"$": "cb", "id": n}: callables of the trusted side (a test's lambda,
a decorated function). Calling one here writes {"cb": n, "call": k, "args": [...], "kwargs": [...]}
and reads lines until {"cbr": k, "ok": value} or {"cbr": k, "err": {...}}, serving the requests
the callback makes meanwhile (nested calls). {"$": "g", "m": module, "q": qualname} names a
global of the standard library or of the solution (a builtin type, an exception class).
"""

import builtins
import importlib
import itertools
import json
import operator
import os
import sys
import traceback
import types
from collections.abc import Callable

from openenv_sdk.grading._codec import _JSON_ENCODER, Codec, CodecError, Limits  # inlined when assembled

VALUE_BASES = (
    ("str", str),
    ("int", int),
    ("float", float),
    ("tuple", tuple),
    ("list", list),
    ("dict", dict),
    ("set", set),
    ("frozenset", frozenset),
    ("bytes", bytes),
)


def _plain(base, value):
    """The exact-`base` copy of `value`, an instance of a subclass of `base`."""
    if base is str:
        return str.__str__(value)
    if base is int:
        return int.__int__(value)
    if base is float:
        return float.__float__(value)
    if base is tuple:
        return tuple(tuple.__iter__(value))
    if base is list:
        return list.copy(value)
    if base is dict:
        return dict(dict.items(value))
    if base is set:
        return set(set.__iter__(value))
    if base is frozenset:
        return frozenset(frozenset.__iter__(value))
    return bytes(memoryview(value))


class Server:
    def __init__(self, modules, limits, requests=None, replies=None):
        self.modules = set(modules)
        self.requests_in = requests
        self.replies_out = replies
        self.callbacks = {}
        self.callback_calls = itertools.count(1)
        self.reply_codec = Codec(limits, _no_encode, _no_tags)
        self.limits = limits
        self.objects = {}
        self.handle_of = {}
        self.next_handle = 1
        self.types = {}
        self.iter_limit = limits.max_items
        self.results = Codec(limits, self.encode_other, _no_tags, self._alias)
        self.requests = Codec(limits, _no_encode, self.decode_tag)
        self._path = self._aliases = None
        self.pins = {}
        self._used_pins = {}
        self.dunders: dict[str, Callable[..., object]] = {
            "__len__": len,
            "__contains__": operator.contains,
            "__iter__": self._materialise,
            "__reversed__": lambda obj: self._materialise(reversed(obj)),
            "__next__": next,
            "__getitem__": operator.getitem,
            "__setitem__": operator.setitem,
            "__delitem__": operator.delitem,
            "__setattr__": setattr,
            "__delattr__": delattr,
            "__eq__": operator.eq,
            "__ne__": operator.ne,
            "__lt__": operator.lt,
            "__le__": operator.le,
            "__gt__": operator.gt,
            "__ge__": operator.ge,
            "__repr__": repr,
            "__str__": str,
            "__bool__": bool,
            "__hash__": hash,
            "__instancecheck__": lambda cls, obj: isinstance(obj, cls),
            "__subclasscheck__": lambda cls, sub: issubclass(sub, cls),
        }

    # --- references -------------------------------------------------------------------

    def module(self, name):
        if type(name) is not str or name.partition(".")[0] not in self.modules:
            raise LookupError(f"module {name!r} is not served by this worker")
        if name in sys.modules:
            return sys.modules[name]
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:  # one of its own imports is missing: the import failed
                sys.modules.pop(name, None)
                raise _ImportFailed(name, e) from e
            raise  # no such (sub)module: the caller's ModuleNotFoundError
        except BaseException as e:  # the solution's import failed: every use of it says why
            sys.modules.pop(name, None)
            raise _ImportFailed(name, e) from e

    def resolve(self, ref):
        if type(ref) is not dict:
            raise LookupError("bad reference")
        if ref.get("$") == "p":
            path = ref["p"]
            target = self.module(path[0])
            for name in path[1:]:
                target = getattr(target, name)
            return target
        if ref.get("$") == "o":
            handle = ref["h"]
            if handle not in self.objects:
                raise LookupError(f"remote object #{handle} was released")
            return self.objects[handle]
        raise LookupError("bad reference")

    def handle(self, obj):
        key = id(obj)
        handle = self.handle_of.get(key)
        if handle is None:
            handle = self.next_handle
            self.next_handle += 1
            self.objects[handle] = obj
            self.handle_of[key] = handle
        return handle

    def free(self, handles):
        for handle in handles:
            obj = self.objects.pop(handle, None)
            if obj is not None:
                self.handle_of.pop(id(obj), None)

    def type_info(self, cls):
        """{"y": type id} and, the first time, {"t": {module, qualname, callable, method names}}."""
        known = self.types.get(cls)
        if known is not None:
            return {"y": known}
        tid = len(self.types) + 1
        self.types[cls] = tid
        methods = []
        seen = set()
        method_kinds = (
            types.FunctionType,
            staticmethod,
            classmethod,
            types.BuiltinFunctionType,
            types.MethodDescriptorType,
            types.WrapperDescriptorType,
        )
        for klass in cls.__mro__:
            for name, attr in vars(klass).items():
                if name.startswith("__") or name in seen:
                    continue
                seen.add(name)
                if isinstance(attr, method_kinds):
                    methods.append(name)
        info = {
            "m": str(getattr(cls, "__module__", "?"))[:200],
            "q": str(getattr(cls, "__qualname__", cls.__name__))[:200],
            "c": any("__call__" in vars(klass) for klass in cls.__mro__),
            "f": methods[:1000],
        }
        return {"y": tid, "t": info}

    # --- encoding -----------------------------------------------------------------------

    def encode(self, value, path=None, aliases=None):
        """The JSON form of a result: an unencodable `value` itself is a path reference when `path`
        is given (else a handle); `aliases` maps ids of arguments to their alias forms."""
        self._path = path
        self._aliases = aliases
        try:
            return self.results.encode(value)
        finally:
            self._path = self._aliases = None

    def _alias(self, value):
        return None if self._aliases is None else self._aliases.get(id(value))

    def value_type_info(self, cls):
        """Like `type_info`, for a subclass of a value type: its own methods (those its classes
        define above the builtin base), or None when it has none or is not the solution's."""
        known = self.types.get(cls)
        if known is not None:
            return known if type(known) is dict else None
        module = str(getattr(cls, "__module__", "?"))
        methods = []
        attributes = False
        if module.partition(".")[0] in self.modules:
            for klass in cls.__mro__:
                if getattr(klass, "__module__", None) == "builtins":
                    continue
                for name, attr in vars(klass).items():
                    if name.startswith("__") or name in methods:
                        continue
                    attributes = True
                    if callable(attr) or isinstance(attr, (staticmethod, classmethod)):
                        methods.append(name)
        if not attributes:
            self.types[cls] = 0
            return None
        tid = len(self.types) + 1
        info = {"y": tid, "t": {"m": module[:200], "q": str(getattr(cls, "__qualname__", "?"))[:200], "c": False,
                                "f": methods[:1000]}}  # fmt: skip
        self.types[cls] = {"y": tid}
        return info

    def encode_other(self, value, depth):
        if isinstance(value, type) and issubclass(value, BaseException):
            return {"$": "e", "c": exception_class(value)}
        cls = type(value)
        for name, base in VALUE_BASES:
            if isinstance(value, base):
                node = {
                    "$": "v",
                    "base": name,
                    "m": str(getattr(cls, "__module__", "?"))[:200],
                    "q": str(getattr(cls, "__qualname__", cls.__name__))[:200],
                    "v": self.results.encode_part(_plain(base, value), depth + 1),
                }
                info = self.value_type_info(cls)
                if info is not None:  # the solution's class with methods of its own: they stay callable
                    node["h"] = self.handle(value)
                    node.update(info)
                return node
        if self._path is not None and depth == 0:
            return {"$": "p", "p": self._path, **self.type_info(cls)}
        return {"$": "o", "h": self.handle(value), **self.type_info(cls)}

    def decode_tag(self, node, depth):
        tag = node["$"]
        if tag in ("o", "p"):
            return self.resolve(node)
        if tag == "pin":
            return self.pinned(node)
        if tag == "cb":
            key = node.get("id")
            if type(key) is not int:
                raise CodecError("bad callback id")
            if key not in self.callbacks:
                self.callbacks[key] = _callback(self, key, node.get("n"))
            return self.callbacks[key]
        if tag == "g":
            return self.global_named(node.get("m"), node.get("q"))
        if tag == "v":
            return _rebuild(node, self.requests.decode_part(node["v"], depth + 1))
        raise CodecError(f"unknown tag {tag!r}")

    def pinned(self, node):
        """A long flat list the trusted side sent before (or sends now) and keeps: the same object at
        each call, as in one process; its snapshot tells whether a call changed it."""
        key = node["id"]
        if "v" in node:
            value = self.requests.decode_part(node["v"], 1)
            if type(value) is not list:
                raise CodecError("a pinned argument must be a list")
            self.pins[key] = (value, list(value))
        elif key not in self.pins:
            raise CodecError(f"unknown pinned argument {key}")
        value = self.pins[key][0]
        self._used_pins[id(value)] = key
        return value

    def global_named(self, module, qualname):
        """A global the trusted side named: a builtin, a standard-library or a solution's object."""
        if type(module) is not str or type(qualname) is not str:
            raise CodecError("bad global reference")
        top = module.partition(".")[0]
        if module == "builtins":
            target = builtins
        elif top in self.modules:
            target = self.module(module)
        elif top in sys.stdlib_module_names:
            target = importlib.import_module(module)
        else:
            raise CodecError(f"module {module!r} is neither the standard library's nor the solution's")
        for part in qualname.split("."):
            target = getattr(target, part)
        return target

    def call_back(self, key, name, args, kwargs):
        """Call the trusted side's callable `key`: send the call, serve nested requests until its answer."""
        call = next(self.callback_calls)
        message = {
            "cb": key,
            "call": call,
            "args": self.encode(list(args)),
            "kwargs": self.encode([x for item in kwargs.items() for x in item]),
        }
        self.write(message)
        for line in self.requests_in:
            request = json.loads(line)
            if request.get("cbr") == call:
                break
            self.write(self.serve(request))
        else:
            os._exit(0)  # the trusted side is gone
        if "ok" in request:
            return self.requests.decode(request["ok"])
        err = request.get("err") or {}
        cls = getattr(builtins, str(err.get("type")), None)
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            cls = RuntimeError
        try:
            error = cls(str(err.get("msg", "")))
        except Exception:
            error = RuntimeError(str(err.get("msg", "")))
        setattr(error, "_openenv_callback_call", call)  # noqa: B010  (tells the trusted side which callback raised it)
        raise error

    def write(self, message):
        data = self.reply_codec.dumps(message)
        self.replies_out.write(data)
        self.replies_out.flush()

    # --- requests -------------------------------------------------------------------------

    def serve(self, request):
        rid = request.get("id")
        self.free(request.get("free") or ())
        for key in request.get("unpin") or ():
            self.pins.pop(key, None)
        self._used_pins = {}
        mutables = []
        pinned = []
        try:
            ref = request["ref"]
            target = self.resolve(ref)
            if request["op"] == "get":
                return {"id": rid, "ok": self.get(target, ref, request["name"])}
            args = self.requests.decode(request["args"])
            flat = self.requests.decode(request["kwargs"])
            kwargs = dict(zip(flat[::2], flat[1::2]))
            for key, value in itertools.chain(enumerate(args), kwargs.items()):
                if id(value) in self._used_pins:
                    pinned.append((key, value, self._used_pins[id(value)]))
                elif type(value) in (list, dict, set):
                    mutables.append((key, value, _JSON_ENCODER.encode(self.encode(value))))
            own = _value_base(target)
            try:
                own_before = _JSON_ENCODER.encode(self.encode(_plain(own, target))) if own is not None else None
            except CodecError:
                own = None
            name = request.get("name")
            if name is None:
                result = target(*args, **kwargs)
            elif name in self.dunders:
                result = self.dunders[name](target, *args)
            else:
                result = getattr(target, name)(*args, **kwargs)
            aliases = {id(value): {"$": "a", "i": key} for key, value, _ in mutables + pinned} or None
            reply = {"id": rid, "ok": self.encode(result, aliases=aliases)}
            if own is not None:
                try:
                    own_after = self.encode(_plain(own, target))
                except CodecError:
                    own_after = None
                if own_after is not None and _JSON_ENCODER.encode(own_after) != own_before:
                    reply["self"] = own_after
        except _ImportFailed as e:
            reply = {"id": rid, "err": self.describe(e.error, "import", e.module)}
        except CodecError as e:
            reply = {"id": rid, "err": {"kind": "unsendable", "type": "CodecError", "msg": str(e)}}
        except BaseException as e:  # the solution's own exceptions, SystemExit included
            reply = {"id": rid, "err": self.describe(e, "raised")}
        changed = self._changed(mutables) + self._changed_pins(pinned)
        if changed:
            reply["mut"] = changed
        return reply

    def get(self, target, ref, name):
        if name == "__all__" and isinstance(target, types.ModuleType):
            names = getattr(target, "__all__", None)
            if names is None:
                names = [n for n in vars(target) if not n.startswith("_")]
            return self.encode([str(n) for n in names])
        path = ref["p"] + [name] if ref.get("$") == "p" else None
        return self.encode(getattr(target, name), path=path)

    def _changed(self, mutables):
        changed = []
        for key, value, before in mutables:
            try:
                after = self.encode(value)
            except CodecError:
                continue
            if _JSON_ENCODER.encode(after) != before:
                changed.append([key, after])
        return changed

    def _changed_pins(self, pinned):
        changed = []
        for key, value, pin in pinned:
            snapshot = self.pins[pin][1]
            if len(value) == len(snapshot) and value == snapshot:
                continue
            try:
                changed.append([key, self.encode(value)])
            except CodecError:  # kept, changed here only: the caller's copy cannot follow
                self.pins[pin] = (value, list(value))
        for key, _value, pin in pinned:
            if changed and any(entry[0] == key for entry in changed):
                self.pins.pop(pin, None)  # the trusted side drops it too when it applies the change
        return changed

    def _materialise(self, iterable):
        items = list(itertools.islice(iter(iterable), self.iter_limit + 1))
        if len(items) > self.iter_limit:
            raise CodecError(f"the iteration yields more than {self.iter_limit} items")
        return items

    def describe(self, error, kind, module=None):
        limit = self.limits.max_text_chars
        try:
            message = str(error)
        except BaseException:
            message = f"<str() of the {type(error).__name__} failed>"
        out: dict[str, object] = {
            "kind": kind,
            "type": type(error).__name__[:200],
            "cls": exception_class(type(error)),
            "msg": message[:limit],
        }
        if module is not None:
            out["module"] = module
        try:
            out["args"] = self.encode(error.args)
        except BaseException:
            pass
        try:
            attrs = {k: v for k, v in vars(error).items() if type(k) is str and not k.startswith("__")}
            call = attrs.pop("_openenv_callback_call", None)
            if type(call) is int:
                out["callback_call"] = call
            if attrs:
                out["attrs"] = self.encode(dict(list(attrs.items())[:64]))
        except BaseException:
            pass
        try:
            tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            out["tb"] = tb[-limit:]
        except BaseException:
            pass
        return out


class _ImportFailed(Exception):
    def __init__(self, module, error):
        super().__init__(module)
        self.module = module
        self.error = error


def exception_class(cls, depth=0):
    """The name, module and exception bases of an exception class, as the trusted side rebuilds it."""
    out: dict[str, object] = {"m": str(getattr(cls, "__module__", "?"))[:200], "q": str(getattr(cls, "__qualname__", "?"))[:200]}
    if out["m"] != "builtins" and depth < 16:
        out["b"] = [exception_class(b, depth + 1) for b in cls.__bases__[:8] if issubclass(b, BaseException)]
    return out


def _value_base(target):
    """The list, dict or set base of an instance of a subclass of one (whose methods may change it)."""
    for base in (list, dict, set):
        if isinstance(target, base) and type(target) is not base:
            return base
    return None


def _callback(server, key, name):
    """The worker's stand-in of a callable of the trusted side."""

    def callback(*args, **kwargs):
        return server.call_back(key, name, args, kwargs)

    if type(name) is str and name.isidentifier():
        callback.__name__ = callback.__qualname__ = name
    return callback


def _rebuild(node, value):
    """An instance of the subclass named by a "v" node, from its plain value; else the plain value."""
    module = sys.modules.get(node.get("m"))
    try:
        cls = module
        for part in str(node.get("q")).split("."):
            cls = getattr(cls, part)
        base = type(value)
        if not (isinstance(cls, type) and issubclass(cls, base)):
            return value
        if base in (list, dict, set):
            obj = base.__new__(cls)
            base.__init__(obj, value)
            return obj
        return base.__new__(cls, value)
    except Exception:
        return value


def _no_tags(node, depth):
    raise CodecError(f"unknown tag {node.get('$')!r}")


def _no_encode(value, depth):
    raise CodecError(f"cannot encode {type(value).__name__}")


def main():
    config = json.loads(sys.argv[1])
    limits = Limits(**config["limits"])
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)
    sys.stdout = sys.stderr
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.getcwd())
    server = Server(config["modules"], limits, requests, replies)
    reply_codec = server.reply_codec
    for line in requests:
        request = None
        try:
            request = json.loads(line)
            reply = server.serve(request)
            data = reply_codec.dumps(reply)
        except CodecError as e:
            rid = request.get("id") if isinstance(request, dict) else None
            data = reply_codec.dumps({"id": rid, "err": {"kind": "unsendable", "type": "CodecError", "msg": str(e)}})
        replies.write(data)
        replies.flush()


if __name__ == "__main__":
    main()
