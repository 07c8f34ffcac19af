"""Frozen dataclasses to JSON and back, driven by their type hints.

Evidence, host documents and bundles are written as plain JSON and read back
on another machine, so a field added to any evidence dataclass must round-trip
without anyone writing a converter for it. ``encode`` walks the values;
``decode`` walks the type hints and checks every value against them, so a
malformed or hostile document is a ``DecodeError`` that names the path, never
a half-built object. Unknown keys are ignored (a newer writer may add fields);
a missing field without a default is an error.

Supported hints: ``int``, ``float``, ``str``, ``bool``, ``None``, ``Any``,
``StrEnum``/``Enum``, ``Path``, ``array.array`` (of int), ``tuple[X, ...]``,
fixed ``tuple[X, Y]``, ``list[X]``, ``dict[str | int, X]``, unions and
dataclasses nesting any of these.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

MAX_DEPTH = 64
"""Nesting a document may have; evidence is a handful of levels deep."""


class DecodeError(ValueError):
    """The JSON does not match the dataclass it should hold; the message says where."""


def encode(value: Any) -> Any:
    """``value`` as JSON-ready lists, dicts and scalars (dataclasses become objects)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list | array):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


def decode(tp: type[T], data: Any) -> T:
    """Rebuild a ``tp`` from ``encode``'s output; raises ``DecodeError`` on any mismatch.

    Equal tuples of scalars come back as one shared object, as the readers build them
    (the Flight Recorder aligner counts identical member lists by identity)."""
    value: T = _Decoder().value(tp, data, "$", 0)
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


class _Decoder:
    def __init__(self) -> None:
        self.shared: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def value(self, tp: Any, data: Any, where: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise DecodeError(f"{where}: nested deeper than {MAX_DEPTH}")
        kind, args = _shape(tp)
        if kind is _SCALAR:
            return _scalar(tp, data, where)
        if kind is _DATACLASS:
            return self._dataclass(args, data, where, depth)
        if kind is _UNION:
            return self._union(args, data, where, depth)
        if kind is _ANY:
            return data
        if kind is _NONE:
            if data is not None:
                raise DecodeError(f"{where}: expected null")
            return None
        if kind is _TUPLE:
            return self._tuple(args, data, where, depth)
        if kind is _LIST:
            (item,) = args
            return [self.value(item, v, f"{where}[{i}]", depth + 1) for i, v in _items(data, where)]
        key, item = args
        if not isinstance(data, dict):
            raise DecodeError(f"{where}: expected an object")
        return {
            _key(key, k, where): self.value(item, v, f"{where}.{k}", depth + 1)
            for k, v in data.items()
        }

    def _union(self, args: tuple[Any, ...], data: Any, where: str, depth: int) -> Any:
        if data is None and type(None) in args:
            return None
        if type(data) in _PLAIN and type(data) in args:  # `int | None` given an int
            return data
        problems = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return self.value(arg, data, where, depth)
            except DecodeError as exc:
                problems.append(str(exc))
        raise DecodeError(problems[0] if len(problems) == 1 else f"{where}: matches no type")

    def _tuple(self, args: tuple[Any, ...], data: Any, where: str, depth: int) -> tuple[Any, ...]:
        items = list(_items(data, where))
        if len(args) == 2 and args[1] is Ellipsis:
            out = tuple(self.value(args[0], v, f"{where}[{i}]", depth + 1) for i, v in items)
        elif args:
            if len(items) != len(args):
                raise DecodeError(f"{where}: expected {len(args)} items, not {len(items)}")
            out = tuple(
                self.value(a, v, f"{where}[{i}]", depth + 1)
                for a, (i, v) in zip(args, items, strict=True)
            )
        else:
            out = tuple(v for _i, v in items)
        if all(type(v) in (int, str) for v in out):
            return self.shared.setdefault(out, out)
        return out

    def _dataclass(self, plan: _Plan, data: Any, where: str, depth: int) -> Any:
        if not isinstance(data, dict):
            raise DecodeError(f"{where}: expected an object for {plan.tp.__name__}")
        values = {}
        for name, hint, required, plain, default in plan.fields:
            if name in data:
                value = data[name]
                # the common case, a value whose type the hint takes as it is (an int for
                # ``int | None``), without a call per field
                if type(value) in plain:
                    values[name] = value
                else:
                    values[name] = self.value(hint, value, f"{where}.{name}", depth + 1)
            elif required:
                raise DecodeError(f"{where}: {plan.tp.__name__} needs '{name}'")
            elif plan.direct:
                values[name] = default() if callable(default) else default
        return plan.build(values)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How to decode one dataclass: per field its name, hint, whether it is required, the
    types its hint takes as they are, and its default (or default factory)."""

    tp: type
    fields: tuple[tuple[str, Any, bool, frozenset[type], Any], ...]
    direct: bool
    """Build the instance as ``pickle`` does (``__dict__`` filled, ``__init__`` not run):
    for a plain frozen dataclass that is the same object, built 3x cheaper, since its
    ``__init__`` calls ``object.__setattr__`` once per field. False for a class with a
    ``__post_init__``, slots, its own ``__init__``, a field outside ``__init__`` or a
    callable default (it could not be told from a factory)."""

    def build(self, values: dict[str, Any]) -> Any:
        """The instance of ``values``: built directly when they name every field (in field
        order), through ``__init__`` when not."""
        if not self.direct or len(values) != len(self.fields):
            return self.tp(**values)
        out: Any = object.__new__(self.tp)
        slots = out.__dict__
        for name, value in values.items():  # one by one: the dict keeps sharing its keys
            slots[name] = value
        return out


def builder(tp: type[T]) -> Callable[[dict[str, Any]], T]:
    """``tp(**values)`` for values already checked, built the cheap way where ``tp`` allows
    (``_Plan.direct``) and ``values`` names every field, in field order: a reader that
    builds a record per rank and sample of 131,072 ranks spent most of its time in
    ``__init__``."""
    kind, plan = _shape(typing.cast(Any, tp))
    if kind is not _DATACLASS:
        raise TypeError(f"{tp!r} is not a dataclass")
    build: Callable[[dict[str, Any]], T] = plan.build
    return build


def _plan(tp: type) -> _Plan:
    hints = _hints(tp)
    fields = dataclasses.fields(tp)
    out = []
    direct = (
        tp.__dataclass_params__.init  # type: ignore[attr-defined]
        and not hasattr(tp, "__post_init__")
        and "__slots__" not in vars(tp)
    )
    for f in fields:
        hint = hints[f.name]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        default: Any = f.default if f.default_factory is dataclasses.MISSING else f.default_factory
        direct = (
            direct and f.init and not (f.default is not dataclasses.MISSING and callable(f.default))
        )
        out.append((f.name, hint, f.init and required, _as_is(hint), default))
    return _Plan(tp, tuple(out), direct)


def _as_is(hint: Any) -> frozenset[type]:
    """The types ``hint`` takes unchanged: ``int | None`` takes an int and None, ``float``
    takes a float (an int is converted, so it is not here), ``Any`` takes nothing fast."""
    if hint in _PLAIN:
        return frozenset((hint,))
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(hint)
        if all(a in _PLAIN or a is type(None) for a in args):
            return frozenset(args)
    if hint is type(None):
        return frozenset((hint,))
    return frozenset()


_SCALAR, _DATACLASS, _UNION, _ANY, _NONE, _TUPLE, _LIST, _DICT = (
    "scalar",
    "dataclass",
    "union",
    "any",
    "none",
    "tuple",
    "list",
    "dict",
)
_PLAIN = (int, str, bool, float)


@functools.cache
def _shape(tp: Any) -> tuple[str, Any]:
    """What decoding a ``tp`` takes, worked out once per type, not once per value: a host
    document of 131,072 ranks' records decodes 2 million fields."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return _ANY, None
    if origin is typing.Union or origin is types.UnionType:
        return _UNION, typing.get_args(tp)
    if tp is type(None):
        return _NONE, None
    if origin is tuple or tp is tuple:
        return _TUPLE, typing.get_args(tp)
    if origin is list:
        return _LIST, typing.get_args(tp)
    if origin is dict:
        return _DICT, typing.get_args(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _DATACLASS, _plan(tp)
    return _SCALAR, None


def _items(data: Any, where: str) -> typing.Iterator[tuple[int, Any]]:
    if not isinstance(data, list):
        raise DecodeError(f"{where}: expected a list")
    return enumerate(data)


def _key(tp: Any, key: str, where: str) -> Any:
    if tp is int:
        try:
            return int(key)
        except ValueError:
            raise DecodeError(f"{where}: key {key!r} is not an integer") from None
    return key


def _scalar(tp: Any, data: Any, where: str) -> Any:
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            raise DecodeError(f"{where}: {data!r} is not a {tp.__name__}") from None
    if tp is array:
        if not isinstance(data, list) or not all(type(v) is int for v in data):
            raise DecodeError(f"{where}: expected a list of integers")
        try:
            return array("q", data)
        except OverflowError:
            raise DecodeError(f"{where}: an integer out of range") from None
    if tp is Path and type(data) is str:
        return Path(data)
    if tp is float and type(data) is int:
        return float(data)
    if tp in (int, float, str, bool) and type(data) is tp:
        return data
    raise DecodeError(f"{where}: expected {getattr(tp, '__name__', tp)}, not {type(data).__name__}")
