"""Reading a gateway's answers off a raw socket, for the tests that write requests by hand
(bounds on one connection: pipelined requests, oversized frames, idle closes)."""

from __future__ import annotations

import socket
import struct


def read_frame(sock: socket.socket) -> bytes | None:
    """A response frame, or None when the gateway closed the connection."""
    data = b""
    try:
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(1 << 20)
            if not chunk:
                return None
            data += chunk
    except OSError:
        return None
    return data[4:]


def read_correlation_ids(sock: socket.socket, count: int) -> list[int]:
    """The correlation ids of the next ``count`` answers, in the order they came."""
    ids: list[int] = []
    buf = b""
    while len(ids) < count:
        chunk = sock.recv(1 << 20)
        assert chunk, f"closed after {len(ids)} answers"
        buf += chunk
        while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
            size = struct.unpack(">i", buf[:4])[0]
            ids.append(struct.unpack(">i", buf[4:8])[0])
            buf = buf[4 + size :]
    return ids
