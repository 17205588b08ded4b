"""The host name the gateway gives clients in Metadata and FindCoordinator answers.

A listener bound to a wildcard address (``0.0.0.0``, ``::``, empty) cannot be named to a
client: as Kafka does for a listener without a host (``InetAddress.getCanonicalHostName``), the
gateway then advertises the machine's fully qualified host name, so a client elsewhere on the
network connects back to this machine. Never 127.0.0.1: a client told "localhost" connects to
its own machine. Where the canonical name is a loopback alias (``/etc/hosts`` mapping the host
name to 127.0.0.1 makes ``getfqdn()`` answer "localhost"), the plain host name is used instead.
``--advertised-host`` overrides all of this (a Kubernetes pod's DNS name, a NAT address).
"""

from __future__ import annotations

import socket

WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]", "*"})
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "localhost6", "ip6-localhost"})


def is_wildcard(host: str) -> bool:
    return host in WILDCARD_HOSTS


def _is_loopback_name(name: str) -> bool:
    return name.lower() in LOOPBACK_NAMES or name.startswith("127.") or name == "::1"


def machine_host_name() -> str:
    """The machine's canonical host name (``socket.getfqdn()``), else its host name."""
    fqdn = socket.getfqdn()
    if fqdn and not _is_loopback_name(fqdn):
        return fqdn
    return socket.gethostname() or fqdn


def advertised_host(listen_host: str, explicit: str | None = None) -> str:
    """``explicit`` when given; the listen address when it names one interface; the machine's
    host name when the listener is bound to every interface."""
    if explicit:
        return explicit
    return machine_host_name() if is_wildcard(listen_host) else listen_host
