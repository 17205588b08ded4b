"""The sans-IO connection: framing, request validation and response ordering, on byte fixtures."""

from __future__ import annotations

import struct

import pytest

from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.common.kafka_wire.framing import ClientConnection, frame_bytes
from groupcoord.gateway.messages.framed_request import Request
from groupcoord.gateway.transport.protocol import (
    ProtocolViolation,
    ServerConnection,
    produce_expects_response,
)


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 1) + b"c"
    return frame_bytes(header + body)


def test_a_request_split_across_reads_is_one_event() -> None:
    conn = ServerConnection()
    data = request_frame(3, 1, 42, b"\x00\x00\x00\x00")
    assert conn.receive_data(data[:3]) == []
    assert conn.receive_data(data[3:9]) == []
    (event,) = conn.receive_data(data[9:])
    assert isinstance(event, Request)
    assert (event.api_key, event.api_version, event.correlation_id, event.seq) == (3, 1, 42, 0)
    assert event.frame == data[4:]


def test_pipelined_requests_in_one_read_keep_their_order() -> None:
    conn = ServerConnection()
    events = conn.receive_data(request_frame(3, 1, 1) + request_frame(3, 1, 2) + request_frame(3, 1, 3))
    assert [e.correlation_id for e in events if isinstance(e, Request)] == [1, 2, 3]
    assert conn.pending == 3


def test_responses_finishing_out_of_order_are_sent_in_request_order() -> None:
    conn = ServerConnection()
    conn.receive_data(request_frame(3, 1, 1) + request_frame(3, 1, 2) + request_frame(3, 1, 3))
    assert conn.respond(2, b"third") == b""
    assert conn.respond(1, b"second") == b""
    assert conn.respond(0, b"first") == frame_bytes(b"first") + frame_bytes(b"second") + frame_bytes(b"third")
    assert conn.pending == 0


def test_a_request_without_response_does_not_block_later_ones() -> None:
    conn = ServerConnection()
    conn.receive_data(request_frame(3, 1, 1) + request_frame(3, 1, 2))
    assert conn.respond(1, b"later") == b""
    assert conn.respond(0, None) == frame_bytes(b"later")


def test_answering_twice_is_a_bug() -> None:
    conn = ServerConnection()
    conn.receive_data(request_frame(3, 1, 1))
    conn.respond(0, b"x")
    with pytest.raises(ValueError):
        conn.respond(0, b"x")


@pytest.mark.parametrize("size", [-1, 3, 101 * 1024 * 1024])
def test_an_impossible_frame_size_is_a_violation(size: int) -> None:
    conn = ServerConnection()
    (event,) = conn.receive_data(struct.pack(">i", size) + b"\x00" * 12)
    assert isinstance(event, ProtocolViolation)
    assert "frame size" in event.reason
    assert conn.closed and conn.receive_data(request_frame(3, 1, 1)) == []


def test_an_unknown_api_key_is_a_violation() -> None:
    (event,) = ServerConnection().receive_data(request_frame(999, 0, 1))
    assert isinstance(event, ProtocolViolation) and "unknown API key 999" in event.reason


def test_an_unknown_version_is_a_violation_except_for_api_versions() -> None:
    (event,) = ServerConnection().receive_data(request_frame(3, 99, 1))
    assert isinstance(event, ProtocolViolation) and "unsupported version" in event.reason
    (event,) = ServerConnection().receive_data(request_frame(ApiKey.API_VERSIONS, 99, 1))
    assert isinstance(event, Request)


def test_requests_before_a_violation_are_still_delivered() -> None:
    events = ServerConnection().receive_data(request_frame(3, 1, 1) + request_frame(999, 0, 2))
    assert isinstance(events[0], Request) and isinstance(events[1], ProtocolViolation)


def test_client_side_matches_responses_by_correlation_id() -> None:
    conn = ClientConnection()
    data = frame_bytes(struct.pack(">i", 7) + b"body") + frame_bytes(struct.pack(">i", 8))
    assert conn.receive_data(data[:5]) == []
    assert [cid for cid, _ in conn.receive_data(data[5:])] == [7, 8]


@pytest.mark.parametrize(
    ("version", "acks", "expected"), [(3, 0, False), (3, -1, True), (9, 0, False), (9, 1, True)]
)
def test_produce_with_acks_zero_expects_no_response(version: int, acks: int, expected: bool) -> None:
    if version >= 9:
        header_end = 0
        body = b"\x00" + struct.pack(">h", acks)  # compact null transactional id
    else:
        header_end = 0
        body = struct.pack(">h", -1) + struct.pack(">h", acks)
    assert produce_expects_response(body, version, header_end) is expected
