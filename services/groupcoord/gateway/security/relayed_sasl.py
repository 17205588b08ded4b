"""Following a client's SASL exchange that the gateway relays to the upstream cluster
(the ``passthrough`` listener mode; sans-IO).

The gateway does not check the credentials: the upstream does, on the client's own upstream
connection. The gateway only watches the exchange go by, to know when it completed and as
whom: PLAIN completes with the first successful SaslAuthenticate, SCRAM with the second (the
server's final message). The user is read from the client's first message (PLAIN's
authentication id, SCRAM's ``n=`` attribute), and counts only once the upstream accepted it.
"""

from __future__ import annotations

from typing import Any

from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.gateway.security.sasl_server import principal_of


def sasl_user(mechanism: str, first_message: bytes) -> str | None:
    """The user a client's first SASL message names, or None if it names none."""
    try:
        text = first_message.decode()
    except UnicodeDecodeError:
        return None
    if mechanism == "PLAIN":
        parts = text.split("\0")
        return parts[1] if len(parts) == 3 and parts[1] else None
    # SCRAM client-first: gs2-header "n,," then "n=<user>,r=<nonce>"; "=2C" / "=3D" escapes
    for attribute in text.split(",")[2:]:
        if attribute.startswith("n="):
            return attribute[2:].replace("=2C", ",").replace("=3D", "=") or None
    return None


class RelayedSasl:
    """One connection's relayed exchange."""

    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.user: str | None = None
        self.principal: str | None = None
        self._accepted_steps = 0
        self._exchanging = False

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def note_request(self, api_key: int, body: Any) -> bool:
        """A SASL request on its way upstream; False if it may not be sent. A handshake after
        authentication starts a re-authentication (KIP-368, when the upstream gave the session
        a lifetime; an upstream that did not refuses it itself)."""
        if api_key == ApiKey.SASL_HANDSHAKE:
            if self._exchanging:
                return False
            self.mechanism = str(body.mechanism)
            self.user, self._accepted_steps, self._exchanging = None, 0, True
            return True
        if not self._exchanging:
            return False
        if self.user is None and self.mechanism is not None:
            self.user = sasl_user(self.mechanism, bytes(body.auth_bytes))
        return True

    def note_response(self, api_key: int, body: Any) -> bool:
        """The upstream's answer; False when it refused (the connection then closes)."""
        if int(body.error_code) != 0:
            return False
        if api_key == ApiKey.SASL_AUTHENTICATE:
            self._accepted_steps += 1
            needed = 1 if self.mechanism == "PLAIN" else 2
            if self._accepted_steps >= needed:
                if self.user is None:
                    return False
                principal = principal_of(self.user)
                if self.principal is not None and principal != self.principal:
                    return False  # re-authentication may not change the principal
                self.principal, self._exchanging = principal, False
        return True
