"""Sans-IO state of a client's connection to the gateway: bytes in, events out; responses in,
bytes out.

Like h11, nothing here touches a socket or a clock. The asyncio transport
(:mod:`.client_session`) feeds received bytes to :meth:`ServerConnection.receive_data` and
writes whatever :meth:`ServerConnection.respond` returns. The connection owns framing
(:mod:`groupcoord.common.kafka_wire.framing`), header validation and response ordering: Kafka clients expect responses on a connection in request order, so a response that
completes early is held until every earlier one has been sent.

It also bounds what a connection may queue: no more than ``max_in_flight`` requests are handed
out unanswered; further complete frames wait in the buffer (:attr:`ServerConnection.paused`
tells the transport to stop reading) and come out of :meth:`ServerConnection.receive_data`
once answers make room.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.common.kafka_wire.framing import DEFAULT_MAX_FRAME, FrameBuffer, frame_bytes
from groupcoord.common.kafka_wire.varint import read_uvarint
from groupcoord.gateway.messages.framed_request import Request

# api key + api version + correlation id + client id length: the smallest possible request.
MIN_REQUEST_FRAME = 10


@dataclass(frozen=True, slots=True)
class ProtocolViolation:
    """The peer sent bytes that cannot be a Kafka request; the connection must close."""

    reason: str


Event = Request | ProtocolViolation


@dataclass
class ServerConnection:
    """One client connection as the gateway sees it."""

    max_frame: int = DEFAULT_MAX_FRAME
    max_in_flight: int = 2**31 - 1
    closed: bool = False
    _frames: FrameBuffer = field(init=False)
    _next_seq: int = 0
    _next_to_send: int = 0
    _ready: dict[int, bytes | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._frames = FrameBuffer(self.max_frame, MIN_REQUEST_FRAME)

    def set_max_frame(self, max_frame: int) -> None:
        """The largest frame from now on (Kafka's limit grows once SASL completes)."""
        self.max_frame = self._frames.max_frame = max_frame

    @property
    def paused(self) -> bool:
        """Whether ``max_in_flight`` requests are unanswered: read nothing more until one is."""
        return self.pending >= self.max_in_flight

    def receive_data(self, data: bytes = b"") -> list[Event]:
        """Feed bytes from the socket; returns the requests (or the violation) they complete,
        no more than leave ``max_in_flight`` unanswered (call again, with no bytes, once
        answers made room)."""
        if self.closed:
            return []
        self._frames.feed(data)
        events: list[Event] = []
        while not self.paused:
            try:
                frame = self._frames.next_frame()
            except ValueError as exc:
                return self._violate(events, str(exc))
            if frame is None:
                return events
            api_key, version, correlation_id = codec.peek_header(frame)
            if api_key not in codec.API_NAMES:
                return self._violate(events, f"unknown API key {api_key}")
            # ApiVersions at an unknown version must still be answered (with UNSUPPORTED_VERSION).
            if not codec.supports(api_key, version) and api_key != ApiKey.API_VERSIONS:
                return self._violate(events, f"unsupported version {version} of API key {api_key}")
            events.append(Request(self._next_seq, api_key, version, correlation_id, frame))
            self._next_seq += 1
        return events

    def _violate(self, events: list[Event], reason: str) -> list[Event]:
        self.closed = True
        events.append(ProtocolViolation(reason))
        return events

    def respond(self, seq: int, payload: bytes | None) -> bytes:
        """Record the response to request ``seq`` (None: the request gets no response, like
        Produce with acks=0) and return the bytes that may now be written, in request order."""
        if seq in self._ready or seq < self._next_to_send:
            raise ValueError(f"request {seq} was already answered")
        self._ready[seq] = payload
        out = bytearray()
        while self._next_to_send in self._ready:
            ready = self._ready.pop(self._next_to_send)
            if ready is not None:
                out += frame_bytes(ready)
            self._next_to_send += 1
        return bytes(out)

    @property
    def pending(self) -> int:
        """Requests received but not yet answered."""
        return self._next_seq - self._next_to_send


def produce_expects_response(frame: bytes, api_version: int, body_offset: int) -> bool:
    """False for Produce with acks=0, which Kafka never answers."""
    pos = body_offset
    if api_version >= 3:  # transactional_id: nullable string before acks
        if api_version >= 9:
            n, pos = read_uvarint(frame, pos)
            pos += max(n - 1, 0)
        else:
            (n,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + max(n, 0)
    (acks,) = struct.unpack_from(">h", frame, pos)
    return acks != 0
