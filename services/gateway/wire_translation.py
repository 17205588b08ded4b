"""Convert between kio wire entities (one class per API version) and our protobuf messages.

The coordinator's gRPC messages are a superset of every wire version of an API, with the same
field names as Kafka's message JSON (kio's snake_case names). The few systematic differences
are handled here once instead of per API:

* kio turns ``...Ms`` fields into ``timedelta`` named without the suffix; proto keeps ``_ms``
  integers (``session_timeout`` <-> ``session_timeout_ms``);
* error codes are kio ``ErrorCode`` enums vs plain ints; topic ids are ``UUID`` vs 16 bytes
  (the null UUID is kio's ``None``);
* "null means unchanged" lists (KIP-848 heartbeats) are proto wrapper messages with one
  repeated field, present or absent.

Fields one side lacks are skipped (from kio) or take the kio default (to kio): a version that
lacks a field simply does not carry it.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import uuid
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)
from kio.static.primitive import i32Timedelta, i64Timedelta

_ZERO_UUID = uuid.UUID(int=0)


def _is_repeated(fd: FieldDescriptor) -> bool:
    return bool(fd.is_repeated)


def _wrapper_field(fd: FieldDescriptor) -> FieldDescriptor | None:
    """The single repeated field of a wrapper message (null-vs-empty list), if ``fd`` is one."""
    if fd.message_type is None or _is_repeated(fd):
        return None
    fields = fd.message_type.fields
    return fields[0] if len(fields) == 1 and _is_repeated(fields[0]) else None


@functools.cache
def _proto_field_for(descriptor: Any, name: str) -> FieldDescriptor | None:
    by_name = descriptor.fields_by_name
    return by_name.get(name) or by_name.get(f"{name}_ms")


def _scalar_to_proto(value: Any) -> Any:
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    if isinstance(value, ErrorCode):
        return int(value.value)
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, bool | str | bytes):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    raise TypeError(f"cannot convert {type(value).__name__} to proto")


def to_proto(entity: Any, message: Message) -> Message:
    """Fill ``message`` from the kio ``entity`` (in place) and return it."""
    descriptor = message.DESCRIPTOR
    for f in dataclasses.fields(entity):
        fd = _proto_field_for(descriptor, f.name)
        if fd is None:
            continue
        value = getattr(entity, f.name)
        if value is None:
            continue  # absent / null: leave unset
        kind = classify_field(f)
        wrapped = _wrapper_field(fd) if kind.is_array else None
        if wrapped is not None:
            holder = getattr(message, fd.name)
            holder.SetInParent()
            inner = getattr(holder, wrapped.name)
            if isinstance(kind, EntityTupleField):
                for item in value:
                    to_proto(item, inner.add())
            else:
                inner.extend(_scalar_to_proto(v) for v in value)
        elif isinstance(kind, EntityTupleField):
            target = getattr(message, fd.name)
            for item in value:
                to_proto(item, target.add())
        elif isinstance(kind, EntityField):
            to_proto(value, getattr(message, fd.name))
        elif isinstance(kind, PrimitiveTupleField):
            getattr(message, fd.name).extend(_scalar_to_proto(v) for v in value)
        else:
            if isinstance(value, uuid.UUID) and value == _ZERO_UUID:
                continue
            setattr(message, fd.name, _scalar_to_proto(value))
    return message


def _scalar_from_proto(kafka_type: str, field_type: Any, value: Any) -> Any:
    if kafka_type == "timedelta_i32":
        return i32Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kafka_type == "timedelta_i64":
        return i64Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kafka_type == "error_code":
        return ErrorCode(value)
    if kafka_type == "uuid":
        return uuid.UUID(bytes=value) if value and value != b"\x00" * 16 else None
    if kafka_type in ("string", "bool", "bytes", "records"):
        return value
    return _primitive_type(field_type)(value)


def _primitive_type(field_type: Any) -> Any:
    """The kio primitive (e.g. ``i32``) behind ``i32`` / ``i32 | None`` / ``tuple[i32, ...]``."""
    args = getattr(field_type, "__args__", None)
    if args:
        for arg in args:
            if arg is not type(None) and arg is not Ellipsis:
                return _primitive_type(arg)
    return field_type


def _has(message: Message, fd: FieldDescriptor) -> bool:
    return fd.has_presence and message.HasField(fd.name)


def from_proto(message: Message, entity_type: type[Any], **overrides: Any) -> Any:
    """Build the kio ``entity_type`` from ``message``; ``overrides`` win over message fields."""
    descriptor = message.DESCRIPTOR
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(entity_type):
        if f.name in overrides:
            kwargs[f.name] = overrides[f.name]
            continue
        fd = _proto_field_for(descriptor, f.name)
        if fd is None:
            continue  # kio default applies (the field is new in this version or ours lacks it)
        kind = classify_field(f)
        wrapped = _wrapper_field(fd) if kind.is_array else None
        if wrapped is not None:
            if not message.HasField(fd.name):
                kwargs[f.name] = None
                continue
            values = getattr(getattr(message, fd.name), wrapped.name)
        elif fd.has_presence and not _is_repeated(fd) and not message.HasField(fd.name):
            if is_optional(f):
                kwargs[f.name] = None
                continue
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            values = getattr(message, fd.name)
        else:
            values = getattr(message, fd.name)
        if isinstance(kind, EntityTupleField):
            kwargs[f.name] = tuple(from_proto(v, kind.type_) for v in values)
        elif isinstance(kind, EntityField):
            kwargs[f.name] = from_proto(values, kind.type_)
        elif isinstance(kind, PrimitiveTupleField):
            kafka_type = get_schema_field_type(f)
            kwargs[f.name] = tuple(_scalar_from_proto(kafka_type, f.type, v) for v in values)
        else:
            kwargs[f.name] = _scalar_from_proto(get_schema_field_type(f), f.type, values)
    return entity_type(**kwargs)
