"""Typed JSON records: frozen dataclasses whose fields are the keys of a JSON object.

A :class:`Record` subclass declares its keys once, as typed fields (``int``, ``float``,
``bool``, ``str``, ``Any``, lists, tuples, ``dict[str, X]``, other records, ``X | None``),
with :func:`key` or :func:`optional` where they need a doc, a default, a JSON name or a rule
for omitting them. One codec reads and writes every record: :meth:`Record.from_dict` checks
each value against its type (a missing or mistyped key is a UserError naming its path; an int
read as ``float`` stays an int, so it is written back as read), :meth:`Record.to_dict` writes
the keys in field order and then the undeclared ones kept in ``extra``, and
:func:`json_schema` derives the JSON Schema from the same fields. Example::

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True, kw_only=True)
    ... class Point(Record):
    ...     x: float
    ...     label: str | None = optional("what the point is")
    >>> Point.from_dict({"x": 1, "z": True}).to_dict()
    {'x': 1, 'z': True}
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field
from typing import Any, ClassVar, NoReturn, TypeVar

from cl_diag.errors import UserError

__all__ = ["At", "Record", "json_schema", "key", "optional"]


@dataclass(frozen=True)
class At:
    """Where a value sits, for error messages: ``where`` (a file), the key path inside it,
    what the whole should be and how to fix it."""

    where: str
    what: str = "valid"
    fix: str = ""
    path: str = ""

    def __truediv__(self, key: object) -> At:
        return dataclasses.replace(self, path=f"{self.path}.{key}" if self.path else str(key))

    def fail(self, problem: str) -> NoReturn:
        fix = f" {self.fix}" if self.fix else ""
        raise UserError(f"{self.where} is not {self.what}: '{self.path}' {problem}.{fix}")

    def obj(self, value: object) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail("is not an object")
        return value


#: the context of a record read from memory, not from a file
_HERE = At("the record")
_META = "cl_diag.io.records"


@dataclass(frozen=True)
class _Key:
    doc: str = ""
    omit: bool | str = False
    name: str | None = None
    pattern: str | None = None
    schema: Mapping[str, Any] = field(default_factory=dict)


def key(
    doc: str = "",
    *,
    default: Any = MISSING,
    factory: Any = MISSING,
    omit: bool | str = False,
    name: str | None = None,
    pattern: str | None = None,
    schema: Mapping[str, Any] | None = None,
) -> Any:
    """A key of a record. ``doc``: what it holds (the schema's description). ``default`` /
    ``factory``: what an absent key reads as; without either the key is required (null is a
    value, allowed when the type has ``| None``). ``omit``: True writes the key only when its
    value is not None; the name of another field writes it only when that field is not None.
    ``name``: the JSON key, when it differs from the attribute. ``pattern``: a
    ``dict[int, X]`` field spread over the keys ``pattern.format(k)`` (``"k{}"``: k20, k200).
    ``schema``: further JSON Schema constraints."""
    meta = _Key(doc, omit, name, pattern, schema or {})
    return field(default=default, default_factory=factory, metadata={_META: meta})


def optional(doc: str = "") -> Any:
    """A key written only when it has a value (absent and null read as None)."""
    return key(doc, default=None, omit=True)


@dataclass(frozen=True)
class _Field:
    name: str
    key: str
    type: Any
    required: bool
    meta: _Key
    pattern: re.Pattern[str] | None


def _union_args(tp: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return None


def _non_null(args: tuple[Any, ...]) -> Any:
    (inner,) = [a for a in args if a is not type(None)]  # X | None: one X
    return inner


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _fields(cls: type[Record]) -> tuple[_Field, ...]:
    """The keys of a record class, in JSON order (worked out once per class)."""
    if cls not in _FIELDS:
        _FIELDS[cls] = _fields_of(cls)
    return _FIELDS[cls]


def _fields_of(cls: type[Record]) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name == "extra" or f.metadata.get("json") is False:
            continue
        meta = f.metadata.get(_META, _Key())
        pattern = meta.pattern and re.escape(meta.pattern).replace(r"\{\}", r"(\d+)")
        out.append(
            _Field(
                name=f.name,
                key=meta.name or f.name,
                type=hints[f.name],
                required=f.default is MISSING and f.default_factory is MISSING,
                meta=meta,
                pattern=re.compile(pattern) if pattern else None,
            )
        )
    if cls._JSON_ORDER:
        out.sort(key=lambda f: cls._JSON_ORDER.index(f.key))
    return tuple(out)


_WORDS = {float: "a number", int: "an integer", bool: "true or false", str: "a string"}


def _read(tp: Any, value: Any, at: At) -> Any:
    """``value`` (from JSON) checked against the type ``tp``; records are built, ints stay ints."""
    args = _union_args(tp)
    if args is not None:
        inner = _non_null(args)
        absent = value is None or (value == {} and _is_record(inner))  # {}: an absent record
        return None if absent else _read(inner, value, at)
    if tp is Any:
        return value
    if _is_record(tp):
        return tp.from_dict(value, at)
    origin = typing.get_origin(tp)
    if origin is list:
        if not isinstance(value, list):
            at.fail("is not a list")
        (item,) = typing.get_args(tp)
        return [_read(item, v, at / k) for k, v in enumerate(value)]
    if origin is tuple:
        items = typing.get_args(tp)
        if len(items) == 2 and items[1] is Ellipsis:
            if not isinstance(value, list):
                at.fail("is not a list")
            return tuple(_read(items[0], v, at / k) for k, v in enumerate(value))
        if not isinstance(value, list) or len(value) != len(items):
            at.fail(f"is not a list of {len(items)}")
        pairs = enumerate(zip(items, value, strict=True))
        return tuple(_read(item, v, at / k) for k, (item, v) in pairs)
    if origin is dict:
        item = typing.get_args(tp)[1]
        return {k: _read(item, v, at / k) for k, v in at.obj(value).items()}
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    if not ok:
        at.fail(f"is not {_WORDS[tp]}")
    return value


def _is_record(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Record)


def _write(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _write(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):  # a tuple is a JSON list too
        return [_write(v) for v in value]
    return value


_R = TypeVar("_R", bound="Record")


@dataclass(frozen=True, kw_only=True)
class Record:
    """A JSON object as a frozen dataclass: its fields are its keys (see :func:`key`);
    ``extra`` keeps the keys it does not declare, written back after the declared ones."""

    extra: dict[str, Any] = field(default_factory=dict)

    #: the keys in JSON order, for a subclass whose inherited fields would come first
    _JSON_ORDER: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_dict(cls: type[_R], d: object, at: At = _HERE) -> _R:
        """Check and type a record (as read from JSON); a problem is a :class:`UserError`
        naming its key path."""
        d = at.obj(d)
        values: dict[str, Any] = {}
        known: set[str] = set()
        for f in _fields(cls):
            if f.pattern is not None:
                matched = {k: m for k in d if (m := f.pattern.fullmatch(k))}
                item = typing.get_args(f.type)[1]
                values[f.name] = {int(m[1]): _read(item, d[k], at / k) for k, m in matched.items()}
                known.update(matched)
                continue
            known.add(f.key)
            if f.key in d:
                values[f.name] = _read(f.type, d[f.key], at / f.key)
            elif f.required:
                (at / f.key).fail("is missing")
        return cls(**values, extra={k: v for k, v in d.items() if k not in known})

    def to_dict(self) -> dict[str, Any]:
        """The record as its JSON object, keys in declared order, then ``extra``."""
        out: dict[str, Any] = {}
        for f in _fields(type(self)):
            value = getattr(self, f.name)
            if f.meta.pattern is not None:
                out.update({f.meta.pattern.format(k): _write(v) for k, v in value.items()})
            elif not (
                (f.meta.omit is True and value is None)
                or (isinstance(f.meta.omit, str) and getattr(self, f.meta.omit) is None)
            ):
                out[f.key] = _write(value)
        out.update(self.extra)
        return out

    @classmethod
    def json_keys(cls) -> tuple[str, ...]:
        """The keys the record declares (a pattern field as its pattern, e.g. ``k{}``)."""
        return tuple(f.meta.pattern or f.key for f in _fields(cls))


_JSON_TYPES = {float: "number", int: "integer", bool: "boolean", str: "string"}


def json_schema(root: type[Record]) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``root``: ``{"$ref": root, "$defs": {name: schema}}``
    with one definition per record class (sorted by name): each key's type, doc and further
    constraints, the required keys, and any other key allowed (a newer writer's)."""
    defs: dict[str, Any] = {}
    classes: dict[str, type[Record]] = {}

    def of(tp: Any) -> dict[str, Any]:
        args = _union_args(tp)
        if args is not None:
            schema = of(_non_null(args))
            if set(schema) == {"type"}:
                return {"type": [schema["type"], "null"]}
            return {"anyOf": [schema, {"type": "null"}]}
        if tp is Any:
            return {}
        if _is_record(tp):
            return {"$ref": f"#/$defs/{define(tp)}"}
        origin = typing.get_origin(tp)
        if origin is list:
            return {"type": "array", "items": of(typing.get_args(tp)[0])}
        if origin is tuple:
            items = typing.get_args(tp)
            if len(items) == 2 and items[1] is Ellipsis:
                return {"type": "array", "items": of(items[0])}
            n = len(items)
            prefix = [of(item) for item in items]
            return {"type": "array", "prefixItems": prefix, "minItems": n, "maxItems": n}
        if origin is dict:
            return {"type": "object", "additionalProperties": of(typing.get_args(tp)[1])}
        return {"type": _JSON_TYPES[tp]}

    def define(cls: type[Record]) -> str:
        name = cls.__name__
        if classes.setdefault(name, cls) is not cls:
            raise ValueError(f"two record classes are named {name}")
        if name in defs:
            return name
        defs[name] = {}  # reserved first: records nest
        properties: dict[str, Any] = {}
        patterns: dict[str, Any] = {}
        for f in _fields(cls):
            if f.pattern is not None:
                patterns[f"^{f.pattern.pattern}$"] = of(typing.get_args(f.type)[1])
            else:
                doc = {"description": f.meta.doc} if f.meta.doc else {}
                properties[f.key] = {**of(f.type), **doc, **f.meta.schema}
        defs[name] = {
            "type": "object",
            "description": inspect.cleandoc(cls.__doc__ or ""),
            "properties": properties,
            "required": [f.key for f in _fields(cls) if f.required and f.pattern is None],
            **({"patternProperties": patterns} if patterns else {}),
        }
        return name

    return {"$ref": f"#/$defs/{define(root)}", "$defs": dict(sorted(defs.items()))}
