"""Kafka wire format through kio: headers, request/response bodies and supported versions.

kio (generated from Apache Kafka's message JSON) does the encoding and decoding; this module
only picks the right kio entity for an (api key, version) and caches readers/writers. kio
rejects unknown tagged fields (``KeyError: Unknown tagged field tag``) where Kafka skips them;
:func:`decode` falls back to :mod:`.tagged_fields`, which drops unknown tags so newer clients
are not cut off.
"""

from __future__ import annotations

import functools
import io
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer

from groupcoord.common.kafka_wire.schemas_after_kio import SCHEMAS
from groupcoord.common.kafka_wire.tagged_fields import UnknownTagError, strip_unknown_tags

API_NAMES: dict[int, str] = dict(api_key_map)

# Every version kio can read and write, per API key, and the versions after kio's of
# :mod:`.schemas_after_kio` (each next to kio's last). The gateway never advertises more.
CODEC_VERSIONS: dict[int, tuple[int, int]] = {
    key: (min(schema_name_map[name]), max([*schema_name_map[name], *(v for k, v in SCHEMAS if k == key)]))
    for key, name in api_key_map.items()
}

_HEADER_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id


class DecodeError(ValueError):
    """The bytes are not a valid message of the announced API and version."""


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id): the fixed prefix every request header starts with."""
    if len(frame) < _HEADER_PREFIX.size:
        raise DecodeError(f"frame of {len(frame)} bytes is shorter than a request header")
    return _HEADER_PREFIX.unpack_from(frame, 0)


def supports(api_key: int, version: int) -> bool:
    rng = CODEC_VERSIONS.get(api_key)
    return rng is not None and rng[0] <= version <= rng[1]


@functools.cache
def request_type(api_key: int, version: int) -> type[Any]:
    after_kio = SCHEMAS.get((api_key, version))
    return after_kio[0] if after_kio is not None else load_request_schema(api_key, version)


@functools.cache
def response_type(api_key: int, version: int) -> type[Any]:
    after_kio = SCHEMAS.get((api_key, version))
    return after_kio[1] if after_kio is not None else load_response_schema(api_key, version)


@functools.cache
def _reader(entity: type[Any]) -> Any:
    return entity_reader(entity)


@functools.cache
def _writer(entity: type[Any]) -> Any:
    return entity_writer(entity)


def decode(entity: type[Any], data: bytes | memoryview, offset: int = 0) -> tuple[Any, int]:
    """Decode one entity at ``offset``; returns (value, bytes consumed).

    Unknown tagged fields are skipped (as Kafka does) by re-reading a copy without them.
    """
    try:
        value, size = _reader(entity)(data, offset)
    except KeyError as exc:
        if "tagged field" not in str(exc):
            raise DecodeError(f"{entity.__name__}: {exc}") from exc
        try:
            cleaned, consumed = strip_unknown_tags(entity, bytes(data), offset)
        except UnknownTagError as strip_exc:
            raise DecodeError(f"{entity.__name__}: {strip_exc}") from strip_exc
        try:
            value, _ = _reader(entity)(cleaned, 0)
        except Exception as again:  # noqa: BLE001 - any failure here is a malformed message
            raise DecodeError(f"{entity.__name__}: {again}") from again
        return value, consumed
    except Exception as exc:  # noqa: BLE001 - kio raises assorted errors on garbage
        raise DecodeError(f"{entity.__name__}: {exc}") from exc
    return value, size


def encode(value: Any) -> bytes:
    buf = io.BytesIO()
    _writer(type(value))(buf, value)
    return buf.getvalue()


def decode_request(frame: bytes | memoryview) -> tuple[Any, Any]:
    """(header, body) of a request frame (without its length prefix)."""
    api_key, version, _ = peek_header(frame)
    if not supports(api_key, version):
        raise DecodeError(f"unsupported API key {api_key} version {version}")
    req = request_type(api_key, version)
    header, offset = decode(req.__header_schema__, frame, 0)
    body, size = decode(req, frame, offset)
    if offset + size != len(frame):
        raise DecodeError(f"{len(frame) - offset - size} trailing bytes after {req.__name__}")
    return header, body


def decode_request_header(frame: bytes | memoryview) -> tuple[Any, int]:
    api_key, version, _ = peek_header(frame)
    if not supports(api_key, version):
        raise DecodeError(f"unsupported API key {api_key} version {version}")
    header, offset = decode(request_type(api_key, version).__header_schema__, frame, 0)
    return header, offset


def encode_response(correlation_id: int, body: Any) -> bytes:
    """A response frame payload (header + body), without the length prefix."""
    header_type = body.__header_schema__
    return encode(header_type(correlation_id=correlation_id)) + encode(body)


def decode_response(api_key: int, version: int, payload: bytes | memoryview) -> tuple[int, Any]:
    """(correlation id, body) of a response payload for the given request API and version."""
    resp = response_type(api_key, version)
    header, offset = decode(resp.__header_schema__, payload, 0)
    body, _ = decode(resp, payload, offset)
    return int(header.correlation_id), body


def encode_request(correlation_id: int, client_id: str | None, body: Any) -> bytes:
    header_type = body.__header_schema__
    header = header_type(
        request_api_key=body.__api_key__,
        request_api_version=body.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    return encode(header) + encode(body)


__all__ = [
    "API_NAMES",
    "CODEC_VERSIONS",
    "DecodeError",
    "decode",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode",
    "encode_request",
    "encode_response",
    "peek_header",
    "request_type",
    "response_type",
    "supports",
]
