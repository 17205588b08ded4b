"""The server side of SASL on a gateway listener, as Kafka's ``SaslServerAuthenticator`` does it
(sans-IO: requests in, responses and "close the connection" out).

A connection on a SASL listener may send only ApiVersions, SaslHandshake and SaslAuthenticate
until it has authenticated; anything else closes it (the session enforces that with
:attr:`SaslServer.authenticated`). SaslHandshake names a mechanism: one not enabled gets
UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection closes after the
response. SaslAuthenticate carries the mechanism's messages: PLAIN (RFC 4616) in one, SCRAM
(RFC 5802/7677, the server side of the ``scramp`` library) in two. A failed authentication
gets SASL_AUTHENTICATION_FAILED and closes the connection; so does any message out of order
(ILLEGAL_SASL_STATE). The principal is ``User:<name>``, as Kafka's default principal builder.

Credentials come from a :class:`CredentialStore`: SCRAM credentials (salt, iterations, stored
and server keys), derived once from passwords when the store is given passwords (a file or a
mounted Kubernetes Secret).
"""

from __future__ import annotations

import base64
import datetime
import hmac
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i64Timedelta

from groupcoord.common.kafka_wire.api_keys import ApiKey

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
SCRAM_ITERATIONS = 4096  # Kafka's minimum for SCRAM credentials
#: the versions served (SaslHandshake v0 is followed by unframed tokens, which no client
#: in use today sends when v1 is offered)
SERVED_VERSIONS = {ApiKey.SASL_HANDSHAKE: (1, 1), ApiKey.SASL_AUTHENTICATE: (0, 2)}


class CredentialError(ValueError):
    """A credential file or directory that cannot be read as credentials."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def as_scramp(self) -> tuple[bytes, bytes, bytes, int]:
        return self.salt, self.stored_key, self.server_key, self.iterations


@dataclass
class CredentialStore:
    """user -> mechanism -> SCRAM credential (PLAIN is checked against any of them)."""

    users: dict[str, dict[str, ScramCredential]] = field(default_factory=dict)

    def add_password(self, user: str, password: str, iterations: int = SCRAM_ITERATIONS) -> None:
        from scramp import ScramMechanism  # noqa: PLC0415

        self.users[user] = {
            mechanism: ScramCredential(*ScramMechanism(mechanism).make_auth_info(password, iterations))
            for mechanism in SCRAM_MECHANISMS
        }

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    def check_password(self, user: str, password: str) -> bool:
        """PLAIN: does ``password`` produce the user's stored SCRAM key?"""
        from scramp import ScramMechanism  # noqa: PLC0415

        for mechanism, credential in self.users.get(user, {}).items():
            _, stored_key, _, _ = ScramMechanism(mechanism).make_auth_info(
                password, credential.iterations, credential.salt
            )
            return hmac.compare_digest(stored_key, credential.stored_key)
        return False

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CredentialStore:
        """Credentials from ``path``: a directory holds one file per user whose content is the
        password (a Kubernetes Secret mounted as a volume, keys = user names); a file is JSON,
        ``{"user": "password"}`` or ``{"user": {"SCRAM-SHA-512": {"salt": b64, "iterations": n,
        "stored_key": b64, "server_key": b64}, ...}}``."""
        path = Path(path)
        store = cls()
        try:
            if path.is_dir():
                for entry in sorted(path.iterdir()):
                    if entry.is_file() and not entry.name.startswith("."):
                        store.add_password(entry.name, entry.read_text().rstrip("\n"))
                return store
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise CredentialError(f"credentials {path}: {exc}") from exc
        if not isinstance(raw, Mapping):
            raise CredentialError(f"credentials {path}: expected a JSON object of users")
        for user, value in raw.items():
            if isinstance(value, str):
                store.add_password(user, value)
                continue
            try:
                store.users[user] = {
                    mechanism: ScramCredential(
                        base64.b64decode(c["salt"]),
                        base64.b64decode(c["stored_key"]),
                        base64.b64decode(c["server_key"]),
                        int(c["iterations"]),
                    )
                    for mechanism, c in value.items()
                    if mechanism in SCRAM_MECHANISMS
                }
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise CredentialError(f"credentials {path}: user {user!r}: {exc!r}") from exc
        return store


def principal_of(user: str) -> str:
    return f"User:{user}"


def _response(api_key: int, version: int, **fields: Any) -> Any:
    from groupcoord.common.kafka_wire import codec  # noqa: PLC0415

    body_type = codec.response_type(api_key, version)
    if "session_lifetime" in body_type.__dataclass_fields__:
        fields.setdefault("session_lifetime", i64Timedelta.parse(datetime.timedelta(0)))
    return body_type(**{k: v for k, v in fields.items() if k in body_type.__dataclass_fields__})


@dataclass
class SaslReply:
    """What to send back, and whether the connection closes after it."""

    response: Any
    close: bool = False


class SaslServer:
    """One connection's SASL exchange, for the ``mechanisms`` enabled on its listener.

    With ``session_lifetime_ms`` (Kafka's ``connections.max.reauth.ms``, KIP-368) the final
    SaslAuthenticate tells the client how long its session lasts; the client re-authenticates
    on the same connection before then (same mechanism, same principal, or the connection
    closes), and a request other than SASL after expiry closes the connection
    (:meth:`expired`).
    """

    def __init__(
        self,
        mechanisms: tuple[str, ...],
        credentials: CredentialStore,
        session_lifetime_ms: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mechanisms = mechanisms
        self.credentials = credentials
        self.session_lifetime_ms = session_lifetime_ms
        self.clock = clock
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.expires_at: float | None = None
        self.reauthentications = 0
        self._exchanging = False  # a handshake was answered and its exchange is not over
        self._scram: Any = None
        self._user = ""
        self._step = 0

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    @property
    def exchanging(self) -> bool:
        """A handshake was answered and its exchange is not over yet."""
        return self._exchanging

    def expired(self) -> bool:
        return self.expires_at is not None and self.clock() > self.expires_at

    def handshake(self, version: int, request: Any) -> SaslReply:
        enabled = tuple(self.mechanisms)
        reauthenticating = self.authenticated and self.session_lifetime_ms > 0
        if self._exchanging or (self.authenticated and not reauthenticating):
            return SaslReply(
                _response(
                    ApiKey.SASL_HANDSHAKE,
                    version,
                    error_code=ErrorCode.illegal_sasl_state,
                    mechanisms=enabled,
                ),
                close=True,
            )
        if request.mechanism not in enabled or (reauthenticating and request.mechanism != self.mechanism):
            return SaslReply(
                _response(
                    ApiKey.SASL_HANDSHAKE,
                    version,
                    error_code=ErrorCode.unsupported_sasl_mechanism,
                    mechanisms=enabled,
                ),
                close=True,
            )
        self.mechanism = request.mechanism
        self._exchanging = True
        self._scram, self._user, self._step = None, "", 0
        return SaslReply(
            _response(ApiKey.SASL_HANDSHAKE, version, error_code=ErrorCode.none, mechanisms=enabled)
        )

    def authenticate(self, version: int, request: Any) -> SaslReply:
        if not self._exchanging:
            return self._fail(version, ErrorCode.illegal_sasl_state, "SaslAuthenticate out of order")
        token = bytes(request.auth_bytes)
        if self.mechanism == "PLAIN":
            return self._plain(version, token)
        return self._scram_step(version, token)

    def _complete(self, version: int, user: str, auth_bytes: bytes = b"") -> SaslReply:
        """The exchange succeeded as ``user``: the session starts (or, re-authenticating, goes on)."""
        principal = principal_of(user)
        if self.principal is not None and principal != self.principal:
            return self._fail(
                version,
                ErrorCode.sasl_authentication_failed,
                f"Cannot change principals during re-authentication from {self.principal}: {principal}",
            )
        if self.principal is not None:
            self.reauthentications += 1
        self.principal = principal
        self._exchanging = False
        lifetime = self.session_lifetime_ms
        if lifetime:
            self.expires_at = self.clock() + lifetime / 1000
        return SaslReply(
            _response(
                ApiKey.SASL_AUTHENTICATE,
                version,
                error_code=ErrorCode.none,
                error_message=None,
                auth_bytes=auth_bytes,
                session_lifetime=i64Timedelta.parse(datetime.timedelta(milliseconds=lifetime)),
            )
        )

    def _ok(self, version: int, auth_bytes: bytes = b"") -> SaslReply:
        return SaslReply(
            _response(
                ApiKey.SASL_AUTHENTICATE,
                version,
                error_code=ErrorCode.none,
                error_message=None,
                auth_bytes=auth_bytes,
            )
        )

    def _fail(self, version: int, code: ErrorCode, message: str) -> SaslReply:
        return SaslReply(
            _response(
                ApiKey.SASL_AUTHENTICATE, version, error_code=code, error_message=message, auth_bytes=b""
            ),
            close=True,
        )

    def _invalid(self, version: int) -> SaslReply:
        return self._fail(
            version,
            ErrorCode.sasl_authentication_failed,
            "Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {self.mechanism}",
        )

    def _plain(self, version: int, token: bytes) -> SaslReply:
        parts = token.split(b"\0")
        if len(parts) != 3:
            return self._invalid(version)
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            return self._invalid(version)
        if (authzid and authzid != user) or not user or not self.credentials.check_password(user, password):
            return self._invalid(version)
        return self._complete(version, user)

    def _scram_step(self, version: int, token: bytes) -> SaslReply:
        from scramp import ScramMechanism  # noqa: PLC0415

        self._step += 1
        try:
            message = token.decode()
            if self._step == 1:
                mechanism = self.mechanism

                def lookup(user: str) -> tuple[bytes, bytes, bytes, int]:
                    self._user = user
                    credential = self.credentials.scram(user, mechanism)
                    if credential is None:
                        raise KeyError(user)
                    return credential.as_scramp()

                self._scram = ScramMechanism(mechanism).make_server(lookup)
                self._scram.set_client_first(message)
                return self._ok(version, self._scram.get_server_first().encode())
            self._scram.set_client_final(message)
            final = self._scram.get_server_final().encode()
        except Exception:  # noqa: BLE001 - any malformed or wrong message is a failed authentication
            return self._invalid(version)
        return self._complete(version, self._user, final)
