"""The wire format of remote grading: Python values as JSON with type tags. No pickle, ever.

This module uses the standard library only and imports nothing from the package: the worker
script inlines its source (see `_script.py`), so both ends share one definition of the format.

One message is one JSON value on one line. Values are encoded as:

    None, bool, str, finite float, int (at most `max_int_digits` digits), list: themselves
    {"$": "f", "v": "inf" | "-inf" | "nan"}        a float that JSON cannot hold
    {"$": "t", "v": [item, ...]}                    tuple
    {"$": "d", "v": [key, value, key, value, ...]}  dict (insertion order kept, any hashable key)
    {"$": "s", "v": [...]}, {"$": "fs", "v": [...]}  set, frozenset
    {"$": "b", "v": "<base64>"}                     bytes
    {"$": "sl", "v": [start, stop, step]}           slice
    {"$": "date", "v": "2024-05-01"}                datetime.date (ISO format)
    {"$": "dtm", "v": "2024-05-01T08:30:00+02:00"}  datetime.datetime (naive, or a fixed UTC offset)
    {"$": "tim", "v": "08:30:00"}                   datetime.time (naive, or a fixed UTC offset)
    {"$": "td", "v": [days, seconds, microseconds]}  datetime.timedelta
    {"$": "dec", "v": "1.50"}                       decimal.Decimal (its exact text)

A date, time or datetime whose tzinfo is not a fixed offset (`datetime.timezone`) is no core value.

Every other `{"$": tag, ...}` object is one end's business (remote objects, subclass values,
exception classes, argument aliases): the codec hands such objects to that end's hooks. Every
bound (`Limits`) is checked while encoding and while decoding, so a hostile message gives a
`CodecError`, never a crash or a value built without bounds.
"""

import base64
import datetime
import decimal
import json
import math

CORE_TAGS = ("f", "t", "d", "s", "fs", "b", "sl", "date", "dtm", "tim", "td", "dec")
_TEXT_TAGS = {
    "date": datetime.date.fromisoformat,
    "dtm": datetime.datetime.fromisoformat,
    "tim": datetime.time.fromisoformat,
    "dec": decimal.Decimal,
}
_MAX_DECIMAL_CHARS = 4100


class CodecError(ValueError):
    """A value that cannot be encoded, or a message that is not valid under the format or its bounds."""


class Limits:
    """Bounds on one message, the same on both ends.

    Attributes:
        max_depth: deepest nesting of containers in a value (a flat list has depth 1).
        max_items: most container items in one message, all containers together.
        max_int_digits: most decimal digits of an int (below Python's 4300-digit parsing limit).
        max_message_bytes: largest encoded message, in bytes.
        max_text_chars: longest exception message, traceback or name carried beside values.
    """

    __slots__ = ("max_depth", "max_items", "max_int_digits", "max_message_bytes", "max_text_chars")

    def __init__(
        self,
        *,
        max_depth=256,
        max_items=2_000_000,
        max_int_digits=4000,
        max_message_bytes=64 * 1024 * 1024,
        max_text_chars=8192,
    ):
        for name, value in (
            ("max_depth", max_depth),
            ("max_items", max_items),
            ("max_int_digits", max_int_digits),
            ("max_message_bytes", max_message_bytes),
            ("max_text_chars", max_text_chars),
        ):
            if type(value) is not int or value < 1:
                raise ValueError(f"Limits.{name} must be a positive int, got {value!r}")
        if max_int_digits > 4000:
            raise ValueError("Limits.max_int_digits must be at most 4000 (Python parses at most 4300 digits)")
        self.max_depth = max_depth
        self.max_items = max_items
        self.max_int_digits = max_int_digits
        self.max_message_bytes = max_message_bytes
        self.max_text_chars = max_text_chars

    def as_dict(self):
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other):
        return type(other) is Limits and self.as_dict() == other.as_dict()

    def __hash__(self):
        return hash(tuple(self.as_dict().values()))

    def __repr__(self):
        return "Limits(" + ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items()) + ")"


_POWERS: dict = {}
_FAST_MIN = 16
_SCALARS = frozenset({int, str, bool, type(None)})
_FLOATS = frozenset({float})
_JSON_SCALARS = frozenset({int, str, bool, type(None), float})
_DECODERS: dict = {}
_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _json_decoder(max_digits):
    """A JSON decoder that refuses ints of more than `max_digits` digits and NaN/Infinity literals."""
    if max_digits not in _DECODERS:

        def parse_int(text):
            if len(text) - text.startswith("-") > max_digits:
                raise CodecError(f"an int has more than {max_digits} digits")
            return int(text)

        _DECODERS[max_digits] = json.JSONDecoder(parse_int=parse_int, parse_constant=_reject_constant)
    return _DECODERS[max_digits]


def _power_of_ten(digits):
    if digits not in _POWERS:
        _POWERS[digits] = 10**digits
    return _POWERS[digits]


def _reject_constant(name):
    raise CodecError(f"{name} is not allowed in a message (non-finite floats are tagged)")


class Codec:
    """Encodes and decodes values under `limits`.

    `encode_other(value, depth)` returns the JSON form of a value the core format does not hold
    (or raises `CodecError`); `decode_tag(node, depth)` returns the value of a `{"$": tag}` object
    whose tag is not a core tag (or raises `CodecError`). `alias(value)` may return a JSON form for
    a list, dict or set that stands for an object the other end already holds, else None.
    """

    def __init__(self, limits, encode_other, decode_tag, alias=None):
        self.limits = limits
        self._encode_other = encode_other
        self._decode_tag = decode_tag
        self._alias = alias
        self._int_bound = _power_of_ten(limits.max_int_digits)
        self._items = 0

    # --- encoding -----------------------------------------------------------------------

    def dumps(self, message):
        """`message` (already JSON-able) as one line of bytes, within `max_message_bytes`."""
        data = _JSON_ENCODER.encode(message).encode("ascii") + b"\n"
        if len(data) > self.limits.max_message_bytes:
            raise CodecError(
                f"the message is {len(data)} bytes, more than the limit of {self.limits.max_message_bytes}"
            )
        return data

    def encode(self, value):
        """The JSON-able form of `value`."""
        self._items = 0
        try:
            return self.encode_part(value, 0)
        except RecursionError:
            raise CodecError("the value is nested too deeply for this interpreter's recursion limit") from None

    def encode_part(self, value, depth):
        """The JSON-able form of `value` found at `depth` (for hooks that encode nested values)."""
        t = type(value)
        if value is None or t is bool or t is str:
            return value
        if t is int:
            if not -self._int_bound < value < self._int_bound:
                raise CodecError(f"an int has more than {self.limits.max_int_digits} digits")
            return value
        if t is float:
            if math.isfinite(value):
                return value
            return {"$": "f", "v": "nan" if value != value else ("inf" if value > 0 else "-inf")}
        if t is list or t is dict or t is set:
            if self._alias is not None:
                aliased = self._alias(value)
                if aliased is not None:
                    return aliased
        if t is list:
            return self._encode_items(value, depth)
        if t is tuple:
            return {"$": "t", "v": self._encode_items(value, depth)}
        if t is dict:
            self._count(len(value), depth)
            flat = []
            for key, item in dict.items(value):
                flat.append(self.encode_part(key, depth + 1))
                flat.append(self.encode_part(item, depth + 1))
            return {"$": "d", "v": flat}
        if t is set:
            return {"$": "s", "v": self._encode_items(value, depth)}
        if t is frozenset:
            return {"$": "fs", "v": self._encode_items(value, depth)}
        if t is bytes:
            self._count(len(value) // 64, depth)
            return {"$": "b", "v": base64.b64encode(value).decode("ascii")}
        if t is slice:
            return {"$": "sl", "v": self._encode_items((value.start, value.stop, value.step), depth)}
        if t is datetime.date:
            return {"$": "date", "v": value.isoformat()}
        if (t is datetime.datetime or t is datetime.time) and (
            value.tzinfo is None or type(value.tzinfo) is datetime.timezone
        ):
            return {"$": "dtm" if t is datetime.datetime else "tim", "v": value.isoformat()}
        if t is datetime.timedelta:
            return {"$": "td", "v": [value.days, value.seconds, value.microseconds]}
        if t is decimal.Decimal:
            text = str(value)
            if len(text) > _MAX_DECIMAL_CHARS:
                raise CodecError(f"a Decimal of more than {_MAX_DECIMAL_CHARS} characters")
            return {"$": "dec", "v": text}
        return self._encode_other(value, depth)

    def _encode_items(self, items, depth):
        self._count(len(items), depth)
        if len(items) >= _FAST_MIN and self.is_flat(items):
            return items if type(items) is list else list(items)
        out = []
        for item in items:  # a loop, not a comprehension: one frame less per level of nesting
            out.append(self.encode_part(item, depth + 1))
        return out

    def is_flat(self, items):
        """Whether every item is None, a bool, a str, a finite float or an int within bounds: then
        the items are their own JSON form (checked at C speed, for long lists)."""
        kinds = set(map(type, items))
        if kinds <= _SCALARS:
            if int in kinds and len(kinds) > 1:
                return False
            if int in kinds:
                return -self._int_bound < min(items) and max(items) < self._int_bound
            return True
        if kinds == _FLOATS:
            return all(map(math.isfinite, items))
        return False

    def _count(self, n, depth):
        if depth >= self.limits.max_depth:
            raise CodecError(f"the value is nested deeper than {self.limits.max_depth} levels (or refers to itself)")
        self._items += n
        if self._items > self.limits.max_items:
            raise CodecError(f"the value holds more than {self.limits.max_items} items")

    # --- decoding -----------------------------------------------------------------------

    def loads(self, data):
        """The JSON value of one message line (bytes), checked against the limits."""
        if len(data) > self.limits.max_message_bytes:
            raise CodecError(f"the message is more than {self.limits.max_message_bytes} bytes")
        try:
            return _json_decoder(self.limits.max_int_digits).decode(data.decode("utf-8"))
        except RecursionError:
            raise CodecError("the message is nested too deeply") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CodecError(f"the message is not valid JSON: {e}") from None

    def decode(self, node):
        """The value of the JSON-able `node`."""
        self._items = 0
        try:
            return self.decode_part(node, 0)
        except RecursionError:
            raise CodecError("the message is nested too deeply for this interpreter's recursion limit") from None

    def decode_part(self, node, depth):
        """The value of `node` found at `depth` (for hooks that decode nested values)."""
        t = type(node)
        if node is None or t is str or t is bool or t is int or t is float:
            return node
        if t is list:
            return self._decode_items(node, depth)
        if t is not dict:
            raise CodecError(f"unexpected JSON value of type {t.__name__}")
        tag = node.get("$")
        if type(tag) is not str:
            raise CodecError("a JSON object without a string '$' tag")
        if tag not in CORE_TAGS:
            return self._decode_tag(node, depth)
        if len(node) != 2 or "v" not in node:
            raise CodecError(f"a {tag!r} object must have exactly the keys '$' and 'v'")
        v = node["v"]
        if tag in _TEXT_TAGS:
            if type(v) is not str or len(v) > _MAX_DECIMAL_CHARS:
                raise CodecError(f"a {tag!r} value must be a string of at most {_MAX_DECIMAL_CHARS} characters")
            try:
                return _TEXT_TAGS[tag](v)
            except (ValueError, ArithmeticError):
                raise CodecError(f"bad {tag!r} value {v[:40]!r}") from None
        if tag == "td":
            if type(v) is not list or len(v) != 3 or any(type(x) is not int for x in v):
                raise CodecError("a timedelta needs three ints")
            try:
                return datetime.timedelta(days=v[0], seconds=v[1], microseconds=v[2])
            except OverflowError:
                raise CodecError("a timedelta out of range") from None
        if tag == "f":
            if v not in ("inf", "-inf", "nan"):
                raise CodecError(f"bad non-finite float {v!r}")
            return float(v)
        if tag == "b":
            if type(v) is not str:
                raise CodecError("bytes must be a base64 string")
            self._count(len(v) // 86, depth)
            try:
                return base64.b64decode(v, validate=True)
            except ValueError:
                raise CodecError("bytes are not valid base64") from None
        if type(v) is not list:
            raise CodecError(f"the 'v' of a {tag!r} object must be an array")
        items = self._decode_items(v, depth)
        try:
            if tag == "t":
                return tuple(items)
            if tag == "d":
                if len(items) % 2:
                    raise CodecError("a dict needs an even number of keys and values")
                result = {}
                for i in range(0, len(items), 2):
                    result[items[i]] = items[i + 1]
                return result
            if tag == "s":
                return set(items)
            if tag == "fs":
                return frozenset(items)
            # "sl"
            if len(items) != 3 or any(x is not None and type(x) is not int for x in items):
                raise CodecError("a slice needs three ints or nulls")
            return slice(*items)
        except TypeError as e:
            raise CodecError(f"a {tag!r} holds an unhashable item: {e}") from None

    def _decode_items(self, items, depth):
        self._count(len(items), depth)
        if len(items) >= _FAST_MIN and set(map(type, items)) <= _JSON_SCALARS:
            return items
        out = []
        for item in items:  # a loop, not a comprehension: one frame less per level of nesting
            out.append(self.decode_part(item, depth + 1))
        return out


def check_text(value, limits, what):
    """`value` when it is a str within `max_text_chars`; else `CodecError`."""
    if type(value) is not str or len(value) > limits.max_text_chars:
        raise CodecError(f"{what} must be a string of at most {limits.max_text_chars} characters")
    return value
