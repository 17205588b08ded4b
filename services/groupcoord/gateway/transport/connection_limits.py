"""What one client may cost the gateway, with Kafka's broker configs, names and defaults.

A Kafka broker bounds every connection before it trusts it: a frame before SASL completes
is at most ``sasl.server.max.receive.size`` (a listener without SASL has no such phase, so
``socket.request.max.bytes`` applies from the first byte, as Kafka's ``DefaultAuthenticator``
does), any frame at most ``socket.request.max.bytes``, a connection idle for
``connections.max.idle.ms`` is closed, and ``max.connections`` / ``max.connections.per.ip``
cap how many a listener holds. Kafka also mutes a connection while it works on its request;
the gateway keeps pipelining (clients send many requests at once and get their answers in
order) but stops reading a connection once ``queued.max.requests`` of its requests are
unanswered, so one connection cannot queue unbounded work.

:class:`ConnectionCounter` is the sans-IO admission rule; the asyncio side
(:mod:`.server`, :mod:`.client_session`) applies the rest.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass, field

UNLIMITED = 2**31 - 1  # Kafka's Int.MaxValue default of max.connections(.per.ip)


@dataclass(frozen=True)
class ConnectionLimits:
    """Kafka's defaults; every field is the broker config of the same name."""

    socket_request_max_bytes: int = 100 * 1024 * 1024
    sasl_server_max_receive_size: int = 512 * 1024
    # Kafka: requests queued broker-wide; here, unanswered requests per connection
    queued_max_requests: int = 500
    max_connections: int = UNLIMITED
    max_connections_per_ip: int = UNLIMITED
    connections_max_idle_ms: int = 10 * 60 * 1000

    def __post_init__(self) -> None:
        for name in ("socket_request_max_bytes", "sasl_server_max_receive_size", "queued_max_requests"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '.')} must be at least 1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per Kafka config (``--socket-request-max-bytes`` for ``socket.request.max.bytes``)."""
    defaults = ConnectionLimits()
    helps = {
        "socket_request_max_bytes": "largest request frame accepted",
        "sasl_server_max_receive_size": "largest frame accepted before SASL authentication completes",
        "queued_max_requests": "unanswered requests per connection before the gateway stops reading it",
        "max_connections": "client connections the gateway holds; a new one beyond is closed",
        "max_connections_per_ip": "client connections from one address; a new one beyond is closed",
        "connections_max_idle_ms": "a connection with no traffic and no request in flight this long is closed",
    }
    for name, text in helps.items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=int,
            default=getattr(defaults, name),
            help=f"Kafka's {name.replace('_', '.')}: {text} (default %(default)s)",
        )


def from_arguments(args: argparse.Namespace) -> ConnectionLimits:
    """The limits :func:`add_arguments`' flags name; a bad one ends the command with one line."""
    try:
        return ConnectionLimits(
            socket_request_max_bytes=args.socket_request_max_bytes,
            sasl_server_max_receive_size=args.sasl_server_max_receive_size,
            queued_max_requests=args.queued_max_requests,
            max_connections=args.max_connections,
            max_connections_per_ip=args.max_connections_per_ip,
            connections_max_idle_ms=args.connections_max_idle_ms,
        )
    except ValueError as exc:
        raise SystemExit(f"connection limits: {exc}") from None


@dataclass
class ConnectionCounter:
    """The connections a gateway holds, by client address: Kafka's ``ConnectionQuotas``."""

    limits: ConnectionLimits
    total: int = 0
    by_ip: Counter[str] = field(default_factory=Counter)

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; or why it must be closed (then not counted).

        Kafka's acceptor stops accepting at ``max.connections`` and closes a connection over
        ``max.connections.per.ip``; asyncio has accepted the socket before we see it, so both
        close it.
        """
        if self.total >= self.limits.max_connections:
            return f"max.connections ({self.limits.max_connections}) reached"
        if self.by_ip[ip] >= self.limits.max_connections_per_ip:
            return f"max.connections.per.ip ({self.limits.max_connections_per_ip}) reached for {ip}"
        self.total += 1
        self.by_ip[ip] += 1
        return None

    def release(self, ip: str) -> None:
        """A connection :meth:`admit` counted has closed."""
        self.total -= 1
        self.by_ip[ip] -= 1
        if not self.by_ip[ip]:
            del self.by_ip[ip]
