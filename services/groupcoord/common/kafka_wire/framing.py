"""Kafka's framing: every request and response is a 4-byte big-endian size, then the payload.

Sans-IO, like h11: bytes in, frames out. :class:`FrameBuffer` is shared by both ends of a
connection; :class:`ClientConnection` is the client end (whoever sends requests to a broker:
the gateway's upstream links, tests, benchmarks), matching responses by correlation id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

SIZE = struct.Struct(">i")
# Kafka's socket.request.max.bytes default; anything larger is treated as garbage.
DEFAULT_MAX_FRAME = 100 * 1024 * 1024


def frame_bytes(payload: bytes) -> bytes:
    """``payload`` with its size prefix, ready for the socket."""
    return SIZE.pack(len(payload)) + payload


class FrameBuffer:
    """Splits a byte stream into size-prefixed frames."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME, min_frame: int = 0) -> None:
        self.max_frame = max_frame
        self.min_frame = min_frame
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def next_frame(self) -> bytes | None:
        """The next complete frame, or None. Raises ValueError on an impossible size."""
        if len(self._buf) < 4:
            return None
        (size,) = SIZE.unpack_from(self._buf, 0)
        if size < self.min_frame or size > self.max_frame:
            raise ValueError(f"impossible frame size {size}")
        if len(self._buf) < 4 + size:
            return None
        frame = bytes(self._buf[4 : 4 + size])
        del self._buf[: 4 + size]
        return frame


@dataclass
class ClientConnection:
    """The client end of a connection to a broker: response frames out, in arrival order."""

    max_frame: int = DEFAULT_MAX_FRAME
    _frames: FrameBuffer = field(init=False)

    def __post_init__(self) -> None:
        # a response is at least its correlation id
        self._frames = FrameBuffer(self.max_frame, 4)

    def receive_data(self, data: bytes) -> list[tuple[int, bytes]]:
        """(correlation id, payload) for each complete response frame. Raises ValueError on an
        impossible frame size."""
        self._frames.feed(data)
        out: list[tuple[int, bytes]] = []
        while (frame := self._frames.next_frame()) is not None:
            (correlation_id,) = SIZE.unpack_from(frame, 0)
            out.append((correlation_id, frame))
        return out
