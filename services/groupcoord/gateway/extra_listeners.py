"""More client listeners in one gateway process, each with its own port, address and security.

Kafka brokers serve several listeners at once (``listeners=PLAIN://:9092,SECURE://:9093``), and
Strimzi's ``listeners[]`` gives each its own TLS and authentication: one port for applications
inside the cluster without TLS, another for clients outside with TLS and SCRAM. The gateway's
bootstrap listener is the one ``--port`` and the ``--listener-*`` flags describe; every other
listener comes from ``--extra-listeners`` (env ``GROUPCOORD_EXTRA_LISTENERS``), a JSON list the
operator writes::

    [{"name": "external", "port": 9192, "brokerPorts": 3,
      "advertisedHostEnv": "GROUPCOORD_ADVERTISED_HOST_EXTERNAL",
      "security": {"ssl_certfile": "/etc/.../tls.crt", "ssl_keyfile": "/etc/.../tls.key",
                   "sasl": "credentials", "sasl_credentials": "/etc/.../users",
                   "sasl_mechanisms": "SCRAM-SHA-512"}}]

``security`` takes the ``--listener-*`` flags' names (``ssl_certfile``, ``sasl``...) with the
same values; ``advertisedHostEnv`` names the variable holding the address (Kubernetes' downward
API gives a pod's IP or its node's only as a variable), ``advertisedHost`` gives it outright.

Each listener is a whole :class:`~.transport.server.Gateway` with its own upstream view (broker
addresses are rewritten to *that* listener's ports, as a Kafka broker answers Metadata with the
addresses of the listener the request came in on) sharing the process's group APIs backends:
the leadership table and the shard connections.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from groupcoord.gateway.assembly import GatewayOptions
from groupcoord.gateway.security.listener_security import ENV, ListenerSecurity, ListenerSecurityError
from groupcoord.gateway.security.sasl_server import CredentialError

ENV_EXTRA_LISTENERS = "GROUPCOORD_EXTRA_LISTENERS"
_KEYS = {"name", "port", "brokerPorts", "advertisedHost", "advertisedHostEnv", "security"}


@dataclass(frozen=True)
class ExtraListener:
    """One listener beside the bootstrap one: where it listens, what it advertises, its security."""

    name: str
    port: int
    broker_ports: int | None = None  # None: as the bootstrap listener's --broker-ports
    advertised_host: str | None = None  # None: as the bootstrap listener's
    security: ListenerSecurity = ListenerSecurity()

    def options(self, bootstrap: GatewayOptions) -> GatewayOptions:
        """The options of this listener's gateway: the bootstrap listener's, with this one's
        port, broker ports, address and security."""
        return dataclasses.replace(
            bootstrap,
            port=self.port,
            broker_ports=bootstrap.broker_ports if self.broker_ports is None else self.broker_ports,
            advertised_host=self.advertised_host or bootstrap.advertised_host,
            listener_security=self.security,
        )


class ExtraListenersError(ValueError):
    """``--extra-listeners`` that cannot be served; the message names the listener."""


def _listener(entry: Any, index: int, environ: Mapping[str, str]) -> ExtraListener:
    if not isinstance(entry, Mapping):
        raise ExtraListenersError(f"listener {index}: expected an object, got {entry!r}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ExtraListenersError(f"listener {index}: needs a name")
    unknown = set(entry) - _KEYS
    if unknown:
        raise ExtraListenersError(
            f"listener {name!r}: unknown keys {sorted(unknown)} (known: {sorted(_KEYS)})"
        )
    port = entry.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < 65536:
        raise ExtraListenersError(f"listener {name!r}: port must be a number from 0 to 65535, not {port!r}")
    broker_ports = entry.get("brokerPorts")
    if broker_ports is not None and (not isinstance(broker_ports, int) or broker_ports < 0):
        raise ExtraListenersError(f"listener {name!r}: brokerPorts must be a number >= 0")
    advertised = entry.get("advertisedHost") or None
    variable = entry.get("advertisedHostEnv")
    if variable:
        advertised = environ.get(variable) or None
        if advertised is None:
            raise ExtraListenersError(f"listener {name!r}: advertisedHostEnv {variable} is not set")
    raw_security = entry.get("security") or {}
    if not isinstance(raw_security, Mapping) or set(raw_security) - set(ENV):
        raise ExtraListenersError(
            f"listener {name!r}: security takes the keys {sorted(ENV)}, not {sorted(set(raw_security) - set(ENV))}"
        )
    values = {
        ENV[key]: ",".join(value) if isinstance(value, list) else str(value)
        for key, value in raw_security.items()
    }
    try:
        security = ListenerSecurity.from_environment(values)
        security.credential_store()  # an unreadable credential file is a startup error too
    except (ListenerSecurityError, CredentialError) as exc:
        raise ExtraListenersError(f"listener {name!r}: {exc}") from None
    return ExtraListener(name, port, broker_ports, advertised, security)


def parse_extra_listeners(
    text: str | None, bootstrap: GatewayOptions, environ: Mapping[str, str] | None = None
) -> tuple[ExtraListener, ...]:
    """The listeners ``text`` (the JSON above) describes, checked: names unique, and no port
    of one listener (its bootstrap port, and its fixed per-broker ports) another's; the
    bootstrap listener is ``bootstrap``'s."""
    if not text or not text.strip():
        return ()
    environ = os.environ if environ is None else environ
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExtraListenersError(f"not JSON: {exc}") from None
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        raise ExtraListenersError("expected a JSON list of listeners")
    listeners = tuple(_listener(entry, i, environ) for i, entry in enumerate(entries))
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ExtraListenersError(f"listener names must be unique: {names}")
    owners: dict[int, str] = {}
    for name, options in (
        ("bootstrap", bootstrap),
        *((lst.name, lst.options(bootstrap)) for lst in listeners),
    ):
        if not options.port:
            continue  # any free port
        for port in range(options.port, options.port + options.broker_ports + 1):
            if port in owners:
                raise ExtraListenersError(f"listeners {owners[port]!r} and {name!r} both want port {port}")
            owners[port] = name
    return listeners
