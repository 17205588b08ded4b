"""One Kafka request on a connection of its own: the asyncio counterpart of the sans-IO codec.

For the calls that need no connection state: the gateway asking the upstream cluster for its
API versions or its brokers, and the parts of group-API requests that belong upstream. Every
failure (refused, timed out, cut short, undecodable) is one :class:`ExchangeFailed`, so callers
handle "the broker did not answer" once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from groupcoord.common.kafka_security import KafkaSecurity, upstream_security
from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.framing import DEFAULT_MAX_FRAME, SIZE, frame_bytes
from groupcoord.common.kafka_wire.secure_connection import open_kafka_connection

Address = tuple[str, int]
CORRELATION_ID = 1


class ExchangeFailed(ConnectionError):
    """The broker did not give a valid answer."""


async def exchange(
    address: Address, body: Any, client_id: str, timeout_s: float, security: KafkaSecurity | None = None
) -> Any:
    """Send the kio request ``body`` to the broker at ``address`` and return the decoded
    response body (of the request's API and version). The connection is secured as
    ``security`` says (default: this process's upstream settings from the environment)."""
    security = upstream_security(security)
    api_key, version = int(body.__api_key__), int(body.__version__)
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await open_kafka_connection(address, security, client_id)
            try:
                writer.write(frame_bytes(codec.encode_request(CORRELATION_ID, client_id, body)))
                (size,) = SIZE.unpack(await reader.readexactly(SIZE.size))
                if size < 4 or size > DEFAULT_MAX_FRAME:
                    raise ExchangeFailed(f"broker {address[0]}:{address[1]} sent frame size {size}")
                payload = await reader.readexactly(size)
            finally:
                writer.close()
        correlation_id, response = codec.decode_response(api_key, version, payload)
    except ExchangeFailed:
        raise
    except (OSError, TimeoutError, asyncio.IncompleteReadError, codec.DecodeError) as exc:
        raise ExchangeFailed(f"broker {address[0]}:{address[1]}: {exc!r}") from exc
    if correlation_id != CORRELATION_ID:
        raise ExchangeFailed(f"broker {address[0]}:{address[1]} answered correlation id {correlation_id}")
    return response
