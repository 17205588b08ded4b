"""Opening a connection to a Kafka broker the way :class:`~groupcoord.common.kafka_security.KafkaSecurity`
says: TLS (host name verified), then SASL (SaslHandshake v1 + SaslAuthenticate v2, as Kafka's
own clients do since KIP-152).

SCRAM's client side is the ``scramp`` library (RFC 5802/7677); PLAIN is one message (RFC 4616).
The authenticated connection is then used like a plaintext one by its caller.
"""

from __future__ import annotations

import asyncio
from typing import Any

from groupcoord.common.kafka_security import KafkaSecurity
from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.framing import DEFAULT_MAX_FRAME, SIZE, frame_bytes

Address = tuple[str, int]


class SaslAuthenticationFailed(ConnectionError):
    """The broker refused our SASL mechanism or credentials."""


async def open_kafka_connection(
    address: Address, security: KafkaSecurity, client_id: str, limit: int = 2**16
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the broker at ``address``, TLS-wrapped and SASL-authenticated as
    ``security`` says (ready for ordinary requests)."""
    host, port = address
    context = security.ssl_context()
    reader, writer = await asyncio.open_connection(
        host, port, ssl=context, server_hostname=host if context is not None else None, limit=limit
    )
    if security.uses_sasl:
        try:
            await sasl_authenticate(reader, writer, security, client_id)
        except BaseException:
            writer.close()
            raise
    return reader, writer


async def _round_trip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, correlation_id: int, client_id: str, body: Any
) -> Any:
    writer.write(frame_bytes(codec.encode_request(correlation_id, client_id, body)))
    await writer.drain()
    (size,) = SIZE.unpack(await reader.readexactly(SIZE.size))
    if size < 4 or size > DEFAULT_MAX_FRAME:
        raise ConnectionError(f"broker sent frame size {size}")
    answered, response = codec.decode_response(
        int(body.__api_key__), int(body.__version__), await reader.readexactly(size)
    )
    if answered != correlation_id:
        raise ConnectionError(f"broker answered correlation id {answered}, expected {correlation_id}")
    return response


class SaslClient:
    """The client side of one SASL exchange: the messages to send, given the server's."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._plain: bytes | None = b"\0" + username.encode() + b"\0" + password.encode()
            self._scram = None
        else:
            from scramp import ScramClient  # noqa: PLC0415

            self._plain = None
            self._scram = ScramClient([mechanism], username, password)
        self.step = 0

    def first(self) -> bytes:
        if self._plain is not None:
            return self._plain
        assert self._scram is not None
        return self._scram.get_client_first().encode()

    def respond(self, challenge: bytes) -> bytes | None:
        """The next message after the server's ``challenge``; None when the exchange is over."""
        from scramp.utils import ScramException  # noqa: PLC0415

        self.step += 1
        if self._scram is None:
            return None
        try:
            if self.step == 1:
                self._scram.set_server_first(challenge.decode())
                return self._scram.get_client_final().encode()
            self._scram.set_server_final(challenge.decode())
        except (ScramException, UnicodeDecodeError, ValueError) as exc:
            raise SaslAuthenticationFailed(f"SCRAM: {exc}") from exc
        return None


async def sasl_authenticate(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, security: KafkaSecurity, client_id: str
) -> None:
    """Authenticate this fresh connection with ``security``'s mechanism and credentials."""
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest  # noqa: PLC0415
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest  # noqa: PLC0415

    assert security.sasl_mechanism and security.sasl_username and security.sasl_password is not None
    handshake = await _round_trip(
        reader, writer, 1, client_id, SaslHandshakeRequest(mechanism=security.sasl_mechanism)
    )
    if int(handshake.error_code) != 0:
        raise SaslAuthenticationFailed(
            f"broker does not accept SASL {security.sasl_mechanism} (error {int(handshake.error_code)}; "
            f"it offers {', '.join(handshake.mechanisms) or 'none'})"
        )
    client = SaslClient(security.sasl_mechanism, security.sasl_username, security.sasl_password)
    message: bytes | None = client.first()
    correlation_id = 2
    while message is not None:
        response = await _round_trip(
            reader, writer, correlation_id, client_id, SaslAuthenticateRequest(auth_bytes=message)
        )
        correlation_id += 1
        if int(response.error_code) != 0:
            raise SaslAuthenticationFailed(
                f"SASL {security.sasl_mechanism} as {security.sasl_username}: "
                f"{response.error_message or 'error ' + str(int(response.error_code))}"
            )
        message = client.respond(bytes(response.auth_bytes))
