"""One serialisation for the records that cross a role or are stored: a frozen dataclass to a
JSON document and back, validated field by field (pydantic), so that what is read back from a
store or a file is checked on the way in, never trusted."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

T = TypeVar("T")
_ADAPTERS: dict[Any, TypeAdapter] = {}  # built once per record type (building one takes milliseconds)


def _adapter(kind: Any) -> TypeAdapter:
    if kind not in _ADAPTERS:
        _ADAPTERS[kind] = TypeAdapter(kind)
    return _ADAPTERS[kind]


def dump(record: Any, kind: Any = None) -> Any:
    """`record` (of `kind`, by default its own type) as JSON-ready data: tuples as lists, enums as
    their values."""
    return _adapter(kind or type(record)).dump_python(record, mode="json")


def load(kind: type[T], data: Any) -> T:
    """A `kind` read from JSON data; a `ValueError` naming the first field that is wrong."""
    try:
        return _adapter(kind).validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise ValueError(f"{kind.__name__}: {where}: {first['msg']}") from None
