"""The consumer's embedded protocol: ConsumerProtocolSubscription and ConsumerProtocolAssignment.

Classic groups carry these as opaque bytes (JoinGroup metadata, SyncGroup assignment). The
coordinator reads them only where Kafka does: the topics a classic consumer group subscribes
to (offset expiry) and, for online migration, the owned/assigned partitions. Versions 0-3 of
both, as in Apache Kafka's ``ConsumerProtocolSubscription.json`` / ``...Assignment.json``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)  # v1+
    generation_id: int = -1  # v2+
    rack_id: str | None = None  # v3+


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: dict[str, list[int]]
    user_data: bytes | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n]
        if len(s) != n:
            raise ValueError("truncated string")
        self.pos += n
        return s.decode()

    def bytes_(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            return None
        b = self.data[self.pos : self.pos + n]
        if len(b) != n:
            raise ValueError("truncated bytes")
        self.pos += n
        return bytes(b)

    def partitions(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for _ in range(self.int32()):
            topic = self.string() or ""
            out[topic] = [self.int32() for _ in range(self.int32())]
        return out

    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def _partitions(parts: dict[str, list[int]]) -> bytes:
    out = [struct.pack(">i", len(parts))]
    for topic, ps in parts.items():
        out.append(_string(topic))
        out.append(struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps))
    return b"".join(out)


def encode_subscription(sub: Subscription, version: int = 3) -> bytes:
    out = [struct.pack(">h", version), struct.pack(">i", len(sub.topics))]
    out.extend(_string(t) for t in sub.topics)
    out.append(_bytes(sub.user_data))
    if version >= 1:
        out.append(_partitions(sub.owned_partitions))
    if version >= 2:
        out.append(struct.pack(">i", sub.generation_id))
    if version >= 3:
        out.append(_string(sub.rack_id))
    return b"".join(out)


def decode_subscription(data: bytes) -> Subscription:
    """Parse a subscription; fields of versions newer than 3 are ignored (forward compatible)."""
    r = _Reader(data)
    version = r.int16()
    topics = [r.string() or "" for _ in range(r.int32())]
    user_data = r.bytes_()
    owned: dict[str, list[int]] = {}
    generation = -1
    rack = None
    if version >= 1 and not r.at_end():
        owned = r.partitions()
    if version >= 2 and not r.at_end():
        generation = r.int32()
    if version >= 3 and not r.at_end():
        rack = r.string()
    return Subscription(topics, user_data, owned, generation, rack)


def encode_assignment(assignment: Assignment, version: int = 3) -> bytes:
    return struct.pack(">h", version) + _partitions(assignment.partitions) + _bytes(assignment.user_data)


def decode_assignment(data: bytes) -> Assignment:
    if not data:
        return Assignment({})
    r = _Reader(data)
    r.int16()
    parts = r.partitions()
    user_data = None if r.at_end() else r.bytes_()
    return Assignment(parts, user_data)
