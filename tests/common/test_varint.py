"""Kafka's unsigned varint, read where a field is peeked without decoding the message."""

from __future__ import annotations

import pytest

from groupcoord.common.kafka_wire.varint import read_uvarint, write_uvarint


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16_384, 2**31 - 1, 2**32 - 1])
def test_round_trip_from_any_position(value: int) -> None:
    encoded = write_uvarint(value)
    assert read_uvarint(b"\x01\x02" + encoded + b"\xff", 2) == (value, 2 + len(encoded))


def test_kafka_bounds_a_truncated_or_overlong_varint() -> None:
    with pytest.raises(ValueError, match="ends early"):
        read_uvarint(b"\x80\x80", 0)
    with pytest.raises(ValueError, match="too long"):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0)  # a sixth byte: Kafka's limit is five
