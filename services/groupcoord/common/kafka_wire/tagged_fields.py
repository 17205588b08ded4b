"""Drop unknown tagged fields from a flexible-version message, so kio can decode it.

Kafka skips tagged fields it does not know (that is how newer clients add optional data
without a version bump); kio 0.6 raises ``KeyError: Unknown tagged field tag`` instead. Until
kio skips them itself, the codec walks the message with kio's own schema metadata and copies
it without the unknown tags. Only used on the error path, so it favours clarity over speed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from groupcoord.common.kafka_wire.varint import read_uvarint, write_uvarint

_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}


class UnknownTagError(ValueError):
    """The message could not be walked (it is malformed, not just newer)."""


class _Walker:
    def __init__(self, data: bytes, offset: int) -> None:
        self.data = data
        self.pos = offset
        self.out = bytearray()

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise UnknownTagError(f"message ends early at byte {self.pos}")

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos)
        except ValueError as exc:
            raise UnknownTagError(str(exc)) from exc
        return value

    def copy_from(self, start: int) -> None:
        self.out += self.data[start : self.pos]

    def skip(self, n: int) -> None:
        self._need(n)
        self.pos += n

    def primitive(self, kafka_type: str, flexible: bool) -> None:
        start = self.pos
        if kafka_type in _FIXED_SIZES:
            self.skip(_FIXED_SIZES[kafka_type])
        elif kafka_type in ("string", "bytes", "records"):
            if flexible:
                n = self.uvarint()
                self.skip(max(n - 1, 0))
            else:
                self._need(4 if kafka_type != "string" else 2)
                width = 2 if kafka_type == "string" else 4
                n = int.from_bytes(self.data[self.pos : self.pos + width], "big", signed=True)
                self.pos += width
                self.skip(max(n, 0))
        else:
            raise UnknownTagError(f"unsupported kafka type {kafka_type}")
        self.copy_from(start)

    def array_length(self, flexible: bool) -> int:
        start = self.pos
        if flexible:
            n = self.uvarint() - 1
        else:
            self._need(4)
            n = int.from_bytes(self.data[self.pos : self.pos + 4], "big", signed=True)
            self.pos += 4
        self.copy_from(start)
        return n

    def entity(self, entity: type[Any]) -> None:
        flexible = bool(entity.__flexible__)
        tagged: dict[int, dataclasses.Field[Any]] = {}
        for f in dataclasses.fields(entity):
            tag = get_field_tag(f)
            if tag is not None:
                tagged[int(tag)] = f
                continue
            self.field(f, flexible)
        if flexible:
            self.tagged_section(tagged)

    def field(self, f: dataclasses.Field[Any], flexible: bool) -> None:
        cls = classify_field(f)
        if isinstance(cls, EntityField):
            if is_optional(f):
                start = self.pos
                self.skip(1)
                self.copy_from(start)
                if self.data[self.pos - 1] == 0xFF:  # null marker (-1)
                    return
            self.entity(cls.type_)
        elif isinstance(cls, EntityTupleField):
            for _ in range(self.array_length(flexible)):
                self.entity(cls.type_)
        elif isinstance(cls, PrimitiveTupleField):
            kafka_type = get_schema_field_type(f)
            for _ in range(self.array_length(flexible)):
                self.primitive(kafka_type, flexible)
        else:
            self.primitive(get_schema_field_type(f), flexible)

    def tagged_section(self, known: dict[int, dataclasses.Field[Any]]) -> None:
        kept: list[bytes] = []
        for _ in range(self.uvarint()):
            start = self.pos
            tag = self.uvarint()
            size = self.uvarint()
            self.skip(size)
            if tag in known:
                kept.append(self.data[start : self.pos])
        self.out += write_uvarint(len(kept))
        for chunk in kept:
            self.out += chunk


def strip_unknown_tags(entity: type[Any], data: bytes, offset: int = 0) -> tuple[bytes, int]:
    """(copy of the entity at ``offset`` without unknown tagged fields, bytes consumed)."""
    walker = _Walker(data, offset)
    walker.entity(entity)
    return bytes(walker.out), walker.pos - offset
