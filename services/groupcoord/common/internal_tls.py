"""Mutual TLS between the coordinator's own processes: gateway, control plane and shards.

A shard worker's gRPC port can commit offsets, delete groups and move leadership for every
group, so it serves only callers holding a certificate of the coordinator's private CA whose
identity (the certificate's common name) may call that service: the Coordinator service only
the gateway, ShardControl only the control plane (and a shard's worker 0 fanning out to its
peers), health any of the three. A Kafka client never reaches a shard: the gateway authorized
it and names it in the envelope (``principal``).

Every party reads the same three files, as a Kubernetes TLS Secret mounts them (``ca.crt``,
``tls.crt``, ``tls.key``): the chart, cert-manager, or :func:`issue` (the throwaway CA
``groupcoord up`` makes at start) write them. Shards are verified under one name,
:data:`SHARD_NAME`, whatever address they are reached at (pod IPs, headless-Service names):
every shard certificate carries it and callers check it (``grpc.ssl_target_name_override``).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

GATEWAY = "groupcoord-gateway"
CONTROL_PLANE = "groupcoord-controlplane"
SHARD_NAME = "groupcoord-shard"
IDENTITIES = (GATEWAY, CONTROL_PLANE, SHARD_NAME)
CA_FILE, CERT_FILE, KEY_FILE = "ca.crt", "tls.crt", "tls.key"

# Who may call what on a shard worker: "service/method" or "service" -> certificate identities
# (the method's entry wins; a service not named here is refused). The gateway asks only
# ShardControl.Ping (a shard's layout); leadership comes only from the control plane, or from
# worker 0 of the same shard forwarding it to its peers.
SHARD_CALLERS: Mapping[str, frozenset[str]] = {
    "groupcoord.rpc.v1.Coordinator": frozenset({GATEWAY}),
    "groupcoord.rpc.v1.ShardControl/Ping": frozenset(IDENTITIES),
    "groupcoord.rpc.v1.ShardControl": frozenset({CONTROL_PLANE, SHARD_NAME}),
    "grpc.health.v1.Health": frozenset(IDENTITIES),
}


@dataclass(frozen=True)
class InternalTls:
    """One party's CA, certificate chain and key (PEM)."""

    ca: bytes
    cert: bytes
    key: bytes

    @classmethod
    def from_dir(cls, path: str | os.PathLike[str]) -> InternalTls:
        """``ca.crt``, ``tls.crt``, ``tls.key`` of ``path`` (a mounted TLS Secret)."""
        base = Path(path)
        try:
            return cls(*((base / name).read_bytes() for name in (CA_FILE, CERT_FILE, KEY_FILE)))
        except OSError as exc:
            raise SystemExit(f"internal TLS: cannot read {exc.filename}: {exc.strerror}") from None

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key, self.cert)], root_certificates=self.ca, require_client_auth=True
        )

    def channel(self, target: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
        """A channel to a shard worker, presenting this party's certificate and verifying the
        shard's under :data:`SHARD_NAME`."""
        credentials = grpc.ssl_channel_credentials(self.ca, self.key, self.cert)
        return grpc.aio.secure_channel(
            target, credentials, options=[*options, ("grpc.ssl_target_name_override", SHARD_NAME)]
        )


def channel(
    tls: InternalTls | None, target: str, options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """A channel to a shard worker: mutual TLS with ``tls``, plaintext without (a shard started
    without ``--internal-tls-dir``).

    Its connection is its own (a local subchannel pool): gRPC otherwise shares one connection
    between the channels of a process to one target, and one channel's trouble fails the
    other's calls. A channel opened again after a failure (the gateway's streams, the control
    plane's ``reset_channel``) would be handed the dying connection, whose close a write in
    flight delays, and fail at once; a peer still starting would put every channel to it into
    reconnect backoff, where calls fail fast."""
    options = [("grpc.use_local_subchannel_pool", 1), *options]
    if tls is None:
        return grpc.aio.insecure_channel(target, options=options)
    return tls.channel(target, options)


def caller(context: grpc.aio.ServicerContext) -> str | None:
    """The certificate identity (common name) of the caller; None without a client certificate."""
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode() if len(names) == 1 else None


class CallerCheck(grpc.aio.ServerInterceptor):
    """Refuses (PERMISSION_DENIED) every call whose caller's identity may not call the service
    (:data:`SHARD_CALLERS`), before the servicer runs; once per call, so once per stream."""

    def __init__(self, allowed: Mapping[str, frozenset[str]] = SHARD_CALLERS) -> None:
        self.allowed = allowed

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method.lstrip("/")
        allowed = self.allowed.get(method, self.allowed.get(method.split("/")[0], frozenset()))
        return _guarded(handler, allowed)


async def _refuse_unless(allowed: frozenset[str], context: grpc.aio.ServicerContext) -> None:
    who = caller(context)
    if who not in allowed:
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"caller {who!r} may not call this service")


def _guarded(handler: grpc.RpcMethodHandler, allowed: frozenset[str]) -> grpc.RpcMethodHandler:
    codec = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        inner_uu = handler.unary_unary

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await _refuse_unless(allowed, context)
            return await inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, **codec)
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream

        async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await _refuse_unless(allowed, context)
            async for reply in inner_us(request, context):
                yield reply

        return grpc.unary_stream_rpc_method_handler(unary_stream, **codec)
    if handler.stream_unary is not None:
        inner_su = handler.stream_unary

        async def stream_unary(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            await _refuse_unless(allowed, context)
            return await inner_su(requests, context)

        return grpc.stream_unary_rpc_method_handler(stream_unary, **codec)
    inner_ss = handler.stream_stream

    async def stream_stream(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        await _refuse_unless(allowed, context)
        async for reply in inner_ss(requests, context):
            yield reply

    return grpc.stream_stream_rpc_method_handler(stream_stream, **codec)


def issue_pems(days: int = 365) -> dict[str, InternalTls]:
    """A new CA and one certificate per identity signed by it (PEM, in memory): identity ->
    its CA, certificate and key. What ``groupcoord up`` writes at start and the operator
    puts in the Secrets it generates."""
    from cryptography import x509  # noqa: PLC0415 - only who issues certificates needs it
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: PLC0415

    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(name("groupcoord-internal-ca"))
        .issuer_name(name("groupcoord-internal-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    issued = {}
    for identity in IDENTITIES:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(identity))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(identity)]), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        issued[identity] = InternalTls(ca_pem, cert.public_bytes(serialization.Encoding.PEM), key_pem)
    return issued


def issue(directory: Path, days: int = 30) -> dict[str, Path]:
    """:func:`issue_pems` written under ``directory``: ``<identity>/`` holding ``ca.crt``,
    ``tls.crt``, ``tls.key`` (files 0600, folders 0700), as a TLS Secret mounts them. Returns
    identity -> its folder."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    folders = {}
    for identity, tls in issue_pems(days).items():
        folder = directory / identity
        folder.mkdir(mode=0o700, exist_ok=True)
        for file, content in ((CA_FILE, tls.ca), (CERT_FILE, tls.cert), (KEY_FILE, tls.key)):
            fd = os.open(folder / file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(content)
        folders[identity] = folder
    return folders
