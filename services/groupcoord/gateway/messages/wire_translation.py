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
lacks a field simply does not carry it. Every (kio class, proto message) pair is compiled once
into a plan of per-field steps, because this runs for every group request the gateway serves
(reflecting over dataclass fields per call cost ~80 µs per heartbeat; a plan costs a few).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
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
_ONE_MS = datetime.timedelta(milliseconds=1)


def _wrapper_field(fd: FieldDescriptor) -> FieldDescriptor | None:
    """The single repeated field of a wrapper message (null-vs-empty list), if ``fd`` is one."""
    if fd.message_type is None or fd.is_repeated:
        return None
    fields = fd.message_type.fields
    return fields[0] if len(fields) == 1 and fields[0].is_repeated else None


def _proto_field_for(descriptor: Descriptor, name: str) -> FieldDescriptor | None:
    by_name = descriptor.fields_by_name
    return by_name.get(name) or by_name.get(f"{name}_ms")


def _scalar_to_proto(value: Any) -> Any:
    if isinstance(value, datetime.timedelta):
        return int(value / _ONE_MS)
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


def _primitive_type(field_type: Any) -> Any:
    """The kio primitive (e.g. ``i32``) behind ``i32`` / ``i32 | None`` / ``tuple[i32, ...]``."""
    args = getattr(field_type, "__args__", None)
    if args:
        for arg in args:
            if arg is not type(None) and arg is not Ellipsis:
                return _primitive_type(arg)
    return field_type


def _scalar_from_proto_fn(kafka_type: str, field_type: Any) -> Callable[[Any], Any]:
    if kafka_type == "timedelta_i32":
        return lambda v: i32Timedelta.parse(datetime.timedelta(milliseconds=v))
    if kafka_type == "timedelta_i64":
        return lambda v: i64Timedelta.parse(datetime.timedelta(milliseconds=v))
    if kafka_type == "error_code":
        return ErrorCode
    if kafka_type == "uuid":
        return lambda v: uuid.UUID(bytes=v) if v and v != b"\x00" * 16 else None
    if kafka_type in ("string", "bool", "bytes", "records"):
        return lambda v: v
    return _primitive_type(field_type)


# --- kio -> proto --------------------------------------------------------------------------

_SCALAR, _ENTITY, _ENTITY_LIST, _SCALAR_LIST, _WRAPPED_ENTITIES, _WRAPPED_SCALARS = range(6)


@dataclass(frozen=True, slots=True)
class _ToStep:
    attr: str
    proto: str
    mode: int
    inner: str = ""  # wrapper's repeated field
    entity: type[Any] | None = None


@functools.cache
def _to_plan(entity_type: type[Any], descriptor: Descriptor) -> tuple[_ToStep, ...]:
    steps = []
    for f in dataclasses.fields(entity_type):
        fd = _proto_field_for(descriptor, f.name)
        if fd is None:
            continue
        kind = classify_field(f)
        wrapped = _wrapper_field(fd) if kind.is_array else None
        if wrapped is not None:
            mode = _WRAPPED_ENTITIES if isinstance(kind, EntityTupleField) else _WRAPPED_SCALARS
            steps.append(_ToStep(f.name, fd.name, mode, wrapped.name, getattr(kind, "type_", None)))
        elif isinstance(kind, EntityTupleField):
            steps.append(_ToStep(f.name, fd.name, _ENTITY_LIST, entity=kind.type_))
        elif isinstance(kind, EntityField):
            steps.append(_ToStep(f.name, fd.name, _ENTITY, entity=kind.type_))
        elif isinstance(kind, PrimitiveTupleField):
            steps.append(_ToStep(f.name, fd.name, _SCALAR_LIST))
        else:
            steps.append(_ToStep(f.name, fd.name, _SCALAR))
    return tuple(steps)


def to_proto(entity: Any, message: Message) -> Message:
    """Fill ``message`` from the kio ``entity`` (in place) and return it."""
    for step in _to_plan(type(entity), message.DESCRIPTOR):
        value = getattr(entity, step.attr)
        if value is None:
            continue  # absent / null: leave unset
        mode = step.mode
        if mode == _SCALAR:
            if isinstance(value, uuid.UUID) and value == _ZERO_UUID:
                continue
            setattr(message, step.proto, _scalar_to_proto(value))
        elif mode == _ENTITY_LIST:
            target = getattr(message, step.proto)
            for item in value:
                to_proto(item, target.add())
        elif mode == _ENTITY:
            to_proto(value, getattr(message, step.proto))
        elif mode == _SCALAR_LIST:
            getattr(message, step.proto).extend(_scalar_to_proto(v) for v in value)
        else:
            holder = getattr(message, step.proto)
            holder.SetInParent()
            inner = getattr(holder, step.inner)
            if mode == _WRAPPED_ENTITIES:
                for item in value:
                    to_proto(item, inner.add())
            else:
                inner.extend(_scalar_to_proto(v) for v in value)
    return message


# --- proto -> kio --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FromStep:
    attr: str
    proto: str
    mode: int
    convert: Callable[[Any], Any]
    inner: str = ""
    entity: type[Any] | None = None
    presence: bool = False  # the proto field can be absent
    absent_is_none: bool = False  # ... and then the kio field is None (else: kio default)
    has_default: bool = False


@functools.cache
def _from_plan(descriptor: Descriptor, entity_type: type[Any]) -> tuple[_FromStep, ...]:
    steps = []
    for f in dataclasses.fields(entity_type):
        fd = _proto_field_for(descriptor, f.name)
        if fd is None:
            continue  # kio default applies (the field is new in this version or ours lacks it)
        kind = classify_field(f)
        wrapped = _wrapper_field(fd) if kind.is_array else None
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        presence = wrapped is not None or (fd.has_presence and not fd.is_repeated)
        common = {
            "presence": presence,
            "absent_is_none": wrapped is not None or is_optional(f),
            "has_default": has_default,
            "inner": wrapped.name if wrapped is not None else "",
        }
        if isinstance(kind, EntityTupleField):
            steps.append(_FromStep(f.name, fd.name, _ENTITY_LIST, lambda v: v, entity=kind.type_, **common))
        elif isinstance(kind, EntityField):
            steps.append(_FromStep(f.name, fd.name, _ENTITY, lambda v: v, entity=kind.type_, **common))
        elif isinstance(kind, PrimitiveTupleField):
            conv = _scalar_from_proto_fn(get_schema_field_type(f), f.type)
            steps.append(_FromStep(f.name, fd.name, _SCALAR_LIST, conv, **common))
        else:
            conv = _scalar_from_proto_fn(get_schema_field_type(f), f.type)
            steps.append(_FromStep(f.name, fd.name, _SCALAR, conv, **common))
    return tuple(steps)


def from_proto(message: Message, entity_type: type[Any], **overrides: Any) -> Any:
    """Build the kio ``entity_type`` from ``message``; ``overrides`` win over message fields."""
    kwargs: dict[str, Any] = {}
    for step in _from_plan(message.DESCRIPTOR, entity_type):
        if step.attr in overrides:
            continue
        if step.presence and not message.HasField(step.proto):
            if step.absent_is_none:
                kwargs[step.attr] = None
                continue
            if step.has_default:
                continue
        value = getattr(message, step.proto)
        if step.inner:
            value = getattr(value, step.inner)
        mode = step.mode
        if mode == _SCALAR:
            kwargs[step.attr] = step.convert(value)
        elif mode == _ENTITY_LIST:
            kwargs[step.attr] = tuple(from_proto(v, step.entity) for v in value)  # type: ignore[arg-type]
        elif mode == _ENTITY:
            kwargs[step.attr] = from_proto(value, step.entity)  # type: ignore[arg-type]
        else:
            kwargs[step.attr] = tuple(step.convert(v) for v in value)
    kwargs.update(overrides)
    return entity_type(**kwargs)
