"""How every groupcoord process connects to the upstream Kafka cluster: TLS and SASL settings.

One type, :class:`KafkaSecurity`, for every upstream hop (the gateway's proxy connections and
its own requests, the shards' state-topic producers and readers, metric-sample producers,
topic-metadata and consumer-lag readers), so one configuration governs them all. It is read
from the environment variables the operator sets on every pod (:data:`ENV`), and CLI flags
override them; a command that starts child processes (``groupcoord up``, ``groupcoord shard``)
exports what its flags said back into the environment (:func:`export_to_environment`), so the
children connect the same way. Passwords are never flags: they come from the environment
(a Secret reference in Kubernetes).

The vocabulary is Kafka's client configuration (``security.protocol``, ``sasl.mechanism``,
``ssl.truststore``...): PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; SASL PLAIN and
SCRAM-SHA-256/512; a CA bundle, a client certificate and key for mutual TLS, and host names
always verified.
"""

from __future__ import annotations

import argparse
import os
import ssl
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, fields
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

#: field of :class:`KafkaSecurity` -> the environment variable it is read from (the names the
#: operator's ``kafka_env`` sets; a test holds the two to each other).
ENV: dict[str, str] = {
    "protocol": "GROUPCOORD_KAFKA_SECURITY_PROTOCOL",
    "ssl_cafile": "GROUPCOORD_KAFKA_SSL_CAFILE",
    "ssl_certfile": "GROUPCOORD_KAFKA_SSL_CERTFILE",
    "ssl_keyfile": "GROUPCOORD_KAFKA_SSL_KEYFILE",
    "sasl_mechanism": "GROUPCOORD_KAFKA_SASL_MECHANISM",
    "sasl_username": "GROUPCOORD_KAFKA_SASL_USERNAME",
    "sasl_password": "GROUPCOORD_KAFKA_SASL_PASSWORD",
}

#: field -> CLI flag (every field but the password).
FLAGS: dict[str, str] = {
    "protocol": "--kafka-security-protocol",
    "ssl_cafile": "--kafka-ssl-cafile",
    "ssl_certfile": "--kafka-ssl-certfile",
    "ssl_keyfile": "--kafka-ssl-keyfile",
    "sasl_mechanism": "--kafka-sasl-mechanism",
    "sasl_username": "--kafka-sasl-username",
}


class SecurityConfigError(ValueError):
    """The upstream security settings contradict each other or name something missing."""


@dataclass(frozen=True)
class KafkaSecurity:
    """The security settings of connections to one Kafka cluster (Kafka client semantics)."""

    protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise SecurityConfigError(
                f"security protocol {self.protocol!r} is not one of {', '.join(PROTOCOLS)}"
            )
        if self.uses_sasl:
            if self.sasl_mechanism is None:
                raise SecurityConfigError(
                    f"{self.protocol} needs a SASL mechanism ({FLAGS['sasl_mechanism']} or {ENV['sasl_mechanism']})"
                )
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise SecurityConfigError(
                    f"SASL mechanism {self.sasl_mechanism!r} is not one of {', '.join(SASL_MECHANISMS)}"
                )
            if not self.sasl_username or self.sasl_password is None:
                raise SecurityConfigError(
                    f"{self.protocol} needs a SASL username ({FLAGS['sasl_username']} or "
                    f"{ENV['sasl_username']}) and password ({ENV['sasl_password']})"
                )
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise SecurityConfigError("a client certificate needs its key and a key its certificate")
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            path = getattr(self, name)
            if path and self.uses_tls and not os.path.isfile(path):
                raise SecurityConfigError(f"{ENV[name]}: no such file {path}")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context (the CA bundle, or the system's; host names verified), or None."""
        if not self.uses_tls:
            return None
        context = ssl.create_default_context(cafile=self.ssl_cafile or None)
        context.check_hostname = True
        context.verify_mode = ssl.CERT_REQUIRED
        if self.ssl_certfile:
            context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
        return context

    def aiokafka_options(self) -> dict[str, Any]:
        """Keyword arguments of aiokafka's clients, producers and admin clients."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.uses_tls:
            options["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            options["sasl_mechanism"] = self.sasl_mechanism
            options["sasl_plain_username"] = self.sasl_username
            options["sasl_plain_password"] = self.sasl_password
        return options

    def without_sasl(self) -> KafkaSecurity:
        """The same transport without authentication (SASL relayed from a client instead)."""
        protocol = {"SASL_SSL": "SSL", "SASL_PLAINTEXT": "PLAINTEXT"}.get(self.protocol, self.protocol)
        return KafkaSecurity(protocol, self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile)

    def environment(self) -> dict[str, str]:
        """These settings as the environment variables :func:`from_environment` reads."""
        return {ENV[f.name]: str(getattr(self, f.name)) for f in fields(self) if getattr(self, f.name)}

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> KafkaSecurity:
        environ = os.environ if environ is None else environ
        values = {name: environ.get(var) or None for name, var in ENV.items()}
        values["protocol"] = (values["protocol"] or "PLAINTEXT").upper()
        if values["sasl_mechanism"]:
            values["sasl_mechanism"] = values["sasl_mechanism"].upper()
        return cls(**values)


def upstream_security(security: KafkaSecurity | None = None) -> KafkaSecurity:
    """``security``, or what this process's environment says (the default of every client)."""
    return security if security is not None else KafkaSecurity.from_environment()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The upstream security flags; each defaults to its environment variable."""
    group = parser.add_argument_group(
        "upstream Kafka security",
        f"defaults from the environment ({', '.join(ENV.values())}); the SASL password only from "
        f"{ENV['sasl_password']}",
    )
    group.add_argument(FLAGS["protocol"], dest="kafka_protocol", choices=PROTOCOLS, type=str.upper)
    group.add_argument(FLAGS["ssl_cafile"], dest="kafka_ssl_cafile", help="CA bundle (PEM)")
    group.add_argument(FLAGS["ssl_certfile"], dest="kafka_ssl_certfile", help="client certificate (mTLS)")
    group.add_argument(FLAGS["ssl_keyfile"], dest="kafka_ssl_keyfile", help="client key (mTLS)")
    group.add_argument(
        FLAGS["sasl_mechanism"], dest="kafka_sasl_mechanism", choices=SASL_MECHANISMS, type=str.upper
    )
    group.add_argument(FLAGS["sasl_username"], dest="kafka_sasl_username")


def from_arguments(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> KafkaSecurity:
    """The flags of :func:`add_arguments` over the environment."""
    base = KafkaSecurity.from_environment(environ).__dict__.copy()
    for name in FLAGS:
        value = getattr(args, f"kafka_{name}", None)
        if value is not None:
            base[name] = value
    return KafkaSecurity(**base)


def export_to_environment(security: KafkaSecurity, environ: MutableMapping[str, str] | None = None) -> None:
    """Make ``security`` what this process and the processes it starts read from the environment."""
    environ = os.environ if environ is None else environ
    for var in ENV.values():
        environ.pop(var, None)
    environ.update(security.environment())


def configure(args: argparse.Namespace) -> KafkaSecurity:
    """A command's upstream security from its flags and environment, exported to the
    environment for the processes it starts; bad settings end the command with one line."""
    try:
        security = from_arguments(args)
    except SecurityConfigError as exc:
        raise SystemExit(f"upstream security: {exc}") from None
    export_to_environment(security)
    return security
