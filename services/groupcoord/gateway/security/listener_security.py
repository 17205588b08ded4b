"""Security of the gateway's client listeners: TLS, client certificates, SASL.

Kafka's listener settings, in our words: a server certificate and key (TLS on every gateway
listener), ``ssl.client.auth`` none / requested / required with a CA bundle for client
certificates, and SASL in one of two modes:

- ``credentials``: the gateway authenticates clients itself (PLAIN and SCRAM-SHA-256/512)
  against a :class:`~.sasl_server.CredentialStore` (a JSON file, or a mounted Kubernetes
  Secret with one key per user) — for upstream clusters without SASL;
- ``passthrough``: the client's SaslHandshake/SaslAuthenticate are relayed to the upstream
  cluster on that client's own upstream connection, so one credential store (the cluster's)
  governs both, and the gateway learns the principal from the exchange the upstream accepted.

The principal of a connection is Kafka's default: ``User:<SASL name>``, else
``User:<certificate subject, RFC 2253>`` for a client certificate, else ``User:ANONYMOUS``.
Configured by ``GROUPCOORD_LISTENER_*`` variables and ``--listener-*`` flags.

Certificates and credentials are reloaded when their files change (:class:`ListenerFiles`), as
Kafka reloads a keystore altered in place: cert-manager renews certificates and a mounted
Secret is updated under a running pod, so a renewal must not need a restart.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groupcoord.gateway.security.sasl_server import (
    MECHANISMS,
    SERVED_VERSIONS,
    CredentialError,
    CredentialStore,
    SaslServer,
)

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
CLIENT_AUTH = ("none", "requested", "required")
SASL_MODES = ("none", "credentials", "passthrough")

ENV: dict[str, str] = {
    "ssl_certfile": "GROUPCOORD_LISTENER_SSL_CERTFILE",
    "ssl_keyfile": "GROUPCOORD_LISTENER_SSL_KEYFILE",
    "ssl_cafile": "GROUPCOORD_LISTENER_SSL_CAFILE",
    "ssl_client_auth": "GROUPCOORD_LISTENER_SSL_CLIENT_AUTH",
    "sasl": "GROUPCOORD_LISTENER_SASL",
    "sasl_mechanisms": "GROUPCOORD_LISTENER_SASL_MECHANISMS",
    "sasl_credentials": "GROUPCOORD_LISTENER_SASL_CREDENTIALS",
    "sasl_session_lifetime_ms": "GROUPCOORD_LISTENER_SASL_SESSION_LIFETIME_MS",
}

# RFC 2253 attribute type names of the subject attributes Python's ssl module reports.
_RFC2253_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


class ListenerSecurityError(ValueError):
    """Listener security settings that contradict each other or name something missing."""


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;=' else ch for ch in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def certificate_principal(peer_certificate: Mapping[str, Any] | None) -> str | None:
    """``User:<subject>`` as Kafka's default SSL principal builder writes it (X500Principal
    RFC 2253: the subject's RDNs last-first, e.g. ``User:CN=app-1,OU=apps,O=example``)."""
    if not peer_certificate or not peer_certificate.get("subject"):
        return None
    rdns = []
    for rdn in reversed(peer_certificate["subject"]):
        rdns.append("+".join(f"{_RFC2253_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(rdns)


@dataclass(frozen=True)
class ListenerSecurity:
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_cafile: str | None = None
    ssl_client_auth: str = "none"
    sasl: str = "none"
    sasl_mechanisms: tuple[str, ...] = MECHANISMS
    sasl_credentials: str | None = None
    #: KIP-368: clients re-authenticate within this (Kafka's connections.max.reauth.ms); 0: never
    sasl_session_lifetime_ms: int = 0

    def __post_init__(self) -> None:
        if self.sasl_session_lifetime_ms < 0:
            raise ListenerSecurityError("the SASL session lifetime cannot be negative")
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise ListenerSecurityError("listener TLS needs both a certificate and its key")
        if self.ssl_client_auth not in CLIENT_AUTH:
            raise ListenerSecurityError(f"client auth {self.ssl_client_auth!r} is not one of {CLIENT_AUTH}")
        if self.ssl_client_auth != "none" and not (self.uses_tls and self.ssl_cafile):
            raise ListenerSecurityError("client certificates need listener TLS and a CA file")
        if self.sasl not in SASL_MODES:
            raise ListenerSecurityError(f"SASL mode {self.sasl!r} is not one of {SASL_MODES}")
        unknown = set(self.sasl_mechanisms) - set(MECHANISMS)
        if unknown or not self.sasl_mechanisms:
            raise ListenerSecurityError(
                f"SASL mechanisms must be some of {MECHANISMS}, not {sorted(unknown)}"
            )
        if self.sasl == "credentials" and not self.sasl_credentials:
            raise ListenerSecurityError(f"SASL mode credentials needs {ENV['sasl_credentials']}")
        for name in ("ssl_certfile", "ssl_keyfile", "ssl_cafile", "sasl_credentials"):
            path = getattr(self, name)
            if path and not os.path.exists(path):
                raise ListenerSecurityError(f"{ENV[name]}: no such file {path}")

    @property
    def uses_tls(self) -> bool:
        return bool(self.ssl_certfile)

    @property
    def sasl_enabled(self) -> bool:
        return self.sasl != "none"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The listeners' server TLS context, or None for plaintext listeners."""
        if not self.uses_tls:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=self.ssl_cafile or None)
        assert self.ssl_certfile is not None
        context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
        context.verify_mode = {
            "none": ssl.CERT_NONE,
            "requested": ssl.CERT_OPTIONAL,
            "required": ssl.CERT_REQUIRED,
        }[self.ssl_client_auth]
        return context

    def served_versions(self) -> dict[int, tuple[int, int]]:
        """The SASL APIs the gateway answers itself (the credentials mode)."""
        return dict(SERVED_VERSIONS) if self.sasl == "credentials" else {}

    def credential_store(self) -> CredentialStore | None:
        return CredentialStore.load(self.sasl_credentials) if self.sasl == "credentials" else None

    def new_sasl_server(self, store: CredentialStore | None) -> SaslServer | None:
        if self.sasl != "credentials":
            return None
        assert store is not None
        return SaslServer(self.sasl_mechanisms, store, self.sasl_session_lifetime_ms)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ListenerSecurity:
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {name: environ.get(var) or None for name, var in ENV.items()}
        values["ssl_client_auth"] = (values["ssl_client_auth"] or "none").lower()
        values["sasl"] = (values["sasl"] or "none").lower()
        try:
            values["sasl_session_lifetime_ms"] = int(values["sasl_session_lifetime_ms"] or 0)
        except ValueError:
            raise ListenerSecurityError(
                f"{ENV['sasl_session_lifetime_ms']} is not a number of milliseconds"
            ) from None
        mechanisms = values.pop("sasl_mechanisms")
        if mechanisms:
            values["sasl_mechanisms"] = tuple(m.strip().upper() for m in mechanisms.split(",") if m.strip())
        return cls(**values)


Stamp = tuple[tuple[int, int, int] | None, ...]


def _stamp(paths: Iterable[str | None]) -> Stamp:
    """What identifies the content of ``paths`` now: inode, modification time and size of
    each (symlinks followed: a Secret volume swaps its ``..data`` link), a directory's entries
    included; None for a missing one."""
    stamps: list[tuple[int, int, int] | None] = []
    for path in paths:
        if not path:
            continue
        entries = [Path(path)]
        if entries[0].is_dir():
            entries += sorted(e for e in entries[0].iterdir() if not e.name.startswith("."))
        for entry in entries:
            try:
                st = entry.stat()
            except OSError:
                stamps.append(None)
                continue
            stamps.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(stamps)


class ListenerFiles:
    """Reloads the listeners' certificate and key (into the live ``context``, in place: new
    connections get the new certificate, established ones keep theirs) and the credential
    store (its users, in place: the next authentication reads them) when their files change
    on disk. A half-written change (a certificate that does not match its key) is kept out
    until it is whole: the listeners go on with what they had."""

    def __init__(
        self, security: ListenerSecurity, context: ssl.SSLContext | None, store: CredentialStore | None
    ) -> None:
        self.security = security
        self.context = context
        self.store = store
        tls_files = (security.ssl_certfile, security.ssl_keyfile, security.ssl_cafile)
        self._tls_files = tls_files if context is not None else ()
        self._store_files = (security.sasl_credentials,) if store is not None else ()
        self._tls_stamp = _stamp(self._tls_files)
        self._store_stamp = _stamp(self._store_files)

    @property
    def watched(self) -> bool:
        return bool(self._tls_files or self._store_files)

    async def refresh(self) -> None:
        """Reload whatever changed since the last call."""
        stamp = _stamp(self._tls_files)
        if stamp != self._tls_stamp and self.context is not None:
            try:
                self.security.ssl_context()  # whole and consistent? (raises if not)
                assert self.security.ssl_certfile is not None
                self.context.load_cert_chain(self.security.ssl_certfile, self.security.ssl_keyfile)
                if self.security.ssl_cafile:  # a CA added is trusted; one removed stays until a restart
                    self.context.load_verify_locations(self.security.ssl_cafile)
            except (OSError, ssl.SSLError) as exc:
                log.warning("listener certificate changed but cannot be loaded yet: %s", exc)
            else:
                self._tls_stamp = stamp
                log.info("listener certificate reloaded from %s", self.security.ssl_certfile)
        stamp = _stamp(self._store_files)
        if stamp != self._store_stamp and self.store is not None:
            assert self.security.sasl_credentials is not None
            try:  # SCRAM derivation of every password: off the event loop
                fresh = await asyncio.to_thread(CredentialStore.load, self.security.sasl_credentials)
            except CredentialError as exc:
                log.warning("listener credentials changed but cannot be loaded yet: %s", exc)
            else:
                self.store.users = fresh.users
                self._store_stamp = stamp
                log.info("listener credentials reloaded: %d user(s)", len(fresh.users))

    async def follow(self, every_s: float = 2.0) -> None:
        """:meth:`refresh` every ``every_s`` until cancelled (a few stat calls each time)."""
        while True:
            await asyncio.sleep(every_s)
            try:
                await self.refresh()
            except Exception:  # a watcher must never take the listeners down
                log.exception("listener files check failed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "client listener security", f"defaults from the environment ({', '.join(ENV.values())})"
    )
    group.add_argument("--listener-ssl-certfile", help="server certificate (PEM): TLS on every listener")
    group.add_argument("--listener-ssl-keyfile", help="server key (PEM)")
    group.add_argument("--listener-ssl-cafile", help="CA bundle for client certificates")
    group.add_argument("--listener-ssl-client-auth", choices=CLIENT_AUTH, help="as Kafka's ssl.client.auth")
    group.add_argument("--listener-sasl", choices=SASL_MODES, help="none, credentials or passthrough")
    group.add_argument(
        "--listener-sasl-mechanisms", help="comma-separated (default: PLAIN,SCRAM-SHA-256,SCRAM-SHA-512)"
    )
    group.add_argument(
        "--listener-sasl-credentials", help="JSON file or directory (one file per user) of credentials"
    )
    group.add_argument(
        "--listener-sasl-session-lifetime-ms",
        help="KIP-368: clients re-authenticate within this many ms, as Kafka's connections.max.reauth.ms (default 0: never)",
    )


def from_arguments(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ListenerSecurity:
    """The ``--listener-*`` flags over the environment; bad settings end the command with one line."""
    merged = dict(os.environ if environ is None else environ)
    for name, var in ENV.items():
        value = getattr(args, f"listener_{name}", None)
        if value is not None:
            merged[var] = value
    try:
        security = ListenerSecurity.from_environment(merged)
        security.credential_store()  # an unreadable credential file is a startup error too
    except (ListenerSecurityError, CredentialError) as exc:
        raise SystemExit(f"listener security: {exc}") from None
    return security
