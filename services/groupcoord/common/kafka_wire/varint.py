"""Kafka's unsigned varint (``ByteUtils.readUnsignedVarint``): the length prefix of flexible
versions' strings, arrays and tagged fields.

kio decodes whole messages; the few places that read a field or two without decoding the
message (the gateway peeking at a Produce request's ``acks``, the walk that drops unknown
tagged fields) read varints here, so there is one reading with Kafka's bounds.
"""

from __future__ import annotations

MAX_BYTES = 5  # an int32 takes at most five 7-bit groups; Kafka rejects a longer varint


def read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``data[pos:]`` and the position after it; ``ValueError`` if the data ends
    before it does or it is longer than Kafka allows."""
    shift = result = 0
    for i in range(pos, min(len(data), pos + MAX_BYTES)):
        b = data[i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i + 1
        shift += 7
    if len(data) < pos + MAX_BYTES:
        raise ValueError(f"message ends early at byte {len(data)}")
    raise ValueError("varint too long")


def write_uvarint(value: int) -> bytes:
    """``value`` (non-negative) as Kafka's unsigned varint."""
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)
