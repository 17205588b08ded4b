"""``--command-config FILE``: Kafka client properties, as ``kafka-consumer-groups.sh`` takes them.

The file is a Java properties file (``key=value`` or ``key: value``, ``#``/``!`` comments, a
trailing backslash continuing a line). What it says about security is mapped onto the client
library the admin command uses (aiokafka, and kio requests through
:mod:`groupcoord.common.kafka_wire` for the calls aiokafka lacks), both of which take a
:class:`~groupcoord.common.kafka_security.KafkaSecurity`:

* ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL;
* ``sasl.mechanism`` PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, with the user and password from
  ``sasl.jaas.config`` (``PlainLoginModule``/``ScramLoginModule required username="..."
  password="...";``) or librdkafka's ``sasl.username``/``sasl.password``;
* the trust store as PEM: ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` (a file)
  or ``ssl.truststore.certificates`` (the certificates themselves), or librdkafka's
  ``ssl.ca.location``; without one the system's CAs are trusted, as Java's default;
* a client certificate for mutual TLS as PEM: ``ssl.keystore.type=PEM`` with
  ``ssl.keystore.location`` (key and certificate chain in one file) or librdkafka's
  ``ssl.certificate.location`` + ``ssl.key.location``; ``ssl.key.password`` for an encrypted key;
* ``ssl.endpoint.identification.algorithm=`` (empty) turns host name verification off, as in
  Kafka's clients; librdkafka's ``enable.ssl.certificate.verification=false`` turns it all off;
* ``client.id``.

Properties the command does not use are ignored with one warning line, as Kafka's AdminClient
logs them; settings it cannot honour (JKS or PKCS12 stores, GSSAPI or OAUTHBEARER) are refused
with one line rather than connecting some other way than the file says.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from groupcoord.common.kafka_security import PROTOCOLS, SASL_MECHANISMS, KafkaSecurity


class CommandConfigError(ValueError):
    """The properties ask for something this client cannot do, or contradict each other."""


def parse_properties(text: str) -> dict[str, str]:
    """A Java ``.properties`` text as a dict (the last of repeated keys wins, as in Java)."""
    out: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip() if logical else raw.strip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:  # an odd number of backslashes: the line goes on
            logical.append(line[:-1])
            continue
        logical.append(line)
        whole, logical = "".join(logical), []
        key, value = _split_property(whole.strip())
        out[key] = value
    if logical:
        key, value = _split_property("".join(logical).strip())
        out[key] = value
    return out


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _split_property(line: str) -> tuple[str, str]:
    """``key=value``, ``key: value`` or ``key value`` (the first unescaped separator)."""
    i = 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        if line[i] in "=: \t":
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(" \t")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t")
    return _unescape(key), _unescape(rest)


@dataclass(frozen=True, slots=True)
class JaasLogin:
    """One ``sasl.jaas.config`` entry: the login module, its control flag and its options."""

    module: str
    flag: str
    options: Mapping[str, str]


_JAAS_TOKEN = re.compile(r'\s*(?:(?P<word>[^\s=;"]+)|(?P<eq>=)|(?P<semi>;)|"(?P<quoted>(?:[^"\\]|\\.)*)")')


def parse_jaas_config(text: str) -> JaasLogin:
    """``<LoginModule> <flag> key="value" ...;`` (Kafka's ``JaasConfig`` grammar: one module
    per client; values quoted or bare)."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _JAAS_TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise CommandConfigError(f"sasl.jaas.config: cannot read {text[pos:]!r}")
        pos = match.end()
        if match["word"] is not None:
            tokens.append(("word", match["word"]))
        elif match["quoted"] is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", match["quoted"])))
        elif match["eq"]:
            tokens.append(("=", "="))
        else:
            tokens.append((";", ";"))
        if pos < len(text) and text[pos:].strip() == "":
            break
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word" or tokens[-1][0] != ";":
        raise CommandConfigError(
            'sasl.jaas.config must read \'<LoginModule> required username="..." password="...";\''
        )
    module, flag = tokens[0][1], tokens[1][1]
    if flag not in ("required", "requisite", "sufficient", "optional"):
        raise CommandConfigError(f"sasl.jaas.config: {flag!r} is not a JAAS control flag")
    options: dict[str, str] = {}
    body = tokens[2:-1]
    if len(body) % 3:
        raise CommandConfigError("sasl.jaas.config: options must be key=value pairs")
    for i in range(0, len(body), 3):
        (kind_k, key), (kind_eq, _), (kind_v, value) = body[i : i + 3]
        if kind_k != "word" or kind_eq != "=" or kind_v not in ("word", "value"):
            raise CommandConfigError("sasl.jaas.config: options must be key=value pairs")
        options[key] = value
    return JaasLogin(module, flag, options)


#: the login module each SASL mechanism needs in ``sasl.jaas.config``
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

#: the properties this command reads (everything else is reported as unused)
KNOWN = frozenset(
    {
        "bootstrap.servers",  # --bootstrap wins, as in Kafka's tool
        "client.id",
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.jaas.config",
        "sasl.username",
        "sasl.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.certificates",
        "ssl.truststore.password",  # not needed for PEM; accepted as Java ignores it there
        "ssl.ca.location",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.endpoint.identification.algorithm",
        "enable.ssl.certificate.verification",
    }
)


@dataclass(frozen=True)
class ClientSecurity(KafkaSecurity):
    """:class:`KafkaSecurity` with what a client-properties file can say besides: an inline
    trust store, a key password, host name verification off, no verification at all."""

    ssl_cadata: str | None = None
    ssl_key_password: str | None = None
    ssl_check_hostname: bool = True
    ssl_verify: bool = True

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.uses_tls:
            return None
        context = ssl.create_default_context(cafile=self.ssl_cafile or None, cadata=self.ssl_cadata or None)
        context.check_hostname = self.ssl_check_hostname and self.ssl_verify
        context.verify_mode = ssl.CERT_REQUIRED if self.ssl_verify else ssl.CERT_NONE
        if self.ssl_certfile:
            context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, self.ssl_key_password)
        return context


@dataclass(frozen=True)
class ClientConfig:
    """What ``--command-config`` said: the security of every connection, the client id, and
    the properties left unused (for the warning line)."""

    security: ClientSecurity = field(default_factory=ClientSecurity)
    client_id: str | None = None
    unused: tuple[str, ...] = ()

    def warning(self) -> str | None:
        """Kafka's AdminClient wording for properties it was given and does not use."""
        if not self.unused:
            return None
        return f"WARN: These configurations '[{', '.join(self.unused)}]' were supplied but are not used."


def _existing(props: Mapping[str, str], key: str) -> str:
    path = os.path.expanduser(props[key])
    if not os.path.isfile(path):
        raise CommandConfigError(f"{key}: no such file {props[key]}")
    return path


def _pem_store(props: Mapping[str, str], kind: str) -> None:
    """Refuse a JKS or PKCS12 store: only PEM can be read here (a store without a type is
    taken as PEM when the file is PEM, where Java would take it as JKS)."""
    location = props.get(f"ssl.{kind}.location")
    store_type = props.get(f"ssl.{kind}.type", "").strip().upper()
    if not store_type and location is not None:
        with open(_existing(props, f"ssl.{kind}.location"), "rb") as f:
            store_type = "PEM" if b"-----BEGIN" in f.read(1 << 16) else "JKS"
    if store_type and store_type != "PEM" and (location is not None or f"ssl.{kind}.certificates" in props):
        raise CommandConfigError(
            f"ssl.{kind}.type={store_type} is not supported: convert the {kind} to PEM and set "
            f"ssl.{kind}.type=PEM"
        )


def client_config(props: Mapping[str, str]) -> ClientConfig:
    """The security and client id ``props`` (Kafka client properties) describe."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise CommandConfigError(f"security.protocol={protocol} is not one of {', '.join(PROTOCOLS)}")
    values: dict[str, object] = {"protocol": protocol}
    uses_sasl = protocol.startswith("SASL_")
    uses_tls = protocol in ("SSL", "SASL_SSL")
    if uses_sasl:
        mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").strip().upper()
        if mechanism not in SASL_MECHANISMS:
            raise CommandConfigError(
                f"sasl.mechanism={mechanism} is not supported (use one of {', '.join(SASL_MECHANISMS)})"
            )
        username, password = props.get("sasl.username"), props.get("sasl.password")
        if "sasl.jaas.config" in props:
            login = parse_jaas_config(props["sasl.jaas.config"])
            if login.module != LOGIN_MODULES[mechanism]:
                raise CommandConfigError(
                    f"sasl.jaas.config names {login.module}; sasl.mechanism={mechanism} needs "
                    f"{LOGIN_MODULES[mechanism]}"
                )
            username, password = login.options.get("username"), login.options.get("password")
        if not username or password is None:
            raise CommandConfigError(
                f"{protocol} with {mechanism} needs username and password in sasl.jaas.config"
            )
        values.update(sasl_mechanism=mechanism, sasl_username=username, sasl_password=password)
    if uses_tls:
        _pem_store(props, "truststore")
        _pem_store(props, "keystore")
        if "ssl.truststore.location" in props:
            values["ssl_cafile"] = _existing(props, "ssl.truststore.location")
        elif "ssl.ca.location" in props:
            values["ssl_cafile"] = _existing(props, "ssl.ca.location")
        if "ssl.truststore.certificates" in props:
            values["ssl_cadata"] = props["ssl.truststore.certificates"]
        if "ssl.keystore.location" in props:
            keystore = _existing(props, "ssl.keystore.location")
            values.update(ssl_certfile=keystore, ssl_keyfile=keystore)
        elif "ssl.certificate.location" in props or "ssl.key.location" in props:
            if "ssl.certificate.location" not in props or "ssl.key.location" not in props:
                raise CommandConfigError("ssl.certificate.location and ssl.key.location go together")
            values.update(
                ssl_certfile=_existing(props, "ssl.certificate.location"),
                ssl_keyfile=_existing(props, "ssl.key.location"),
            )
        if props.get("ssl.key.password"):
            values["ssl_key_password"] = props["ssl.key.password"]
        values["ssl_check_hostname"] = (
            props.get("ssl.endpoint.identification.algorithm", "https").strip() != ""
        )
        values["ssl_verify"] = (
            props.get("enable.ssl.certificate.verification", "true").strip().lower() != "false"
        )
    security = ClientSecurity(**values)  # type: ignore[arg-type]
    if uses_tls:
        try:
            security.ssl_context()  # unreadable PEM: one line now, not a traceback at connect
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise CommandConfigError(f"TLS settings: {exc}") from None
    unused = tuple(sorted(k for k in props if k not in KNOWN))
    return ClientConfig(security, props.get("client.id") or None, unused)


def load_client_config(path: str | None) -> ClientConfig:
    """``--command-config PATH`` (None: plaintext, no properties)."""
    if path is None:
        return ClientConfig()
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CommandConfigError(f"--command-config {path}: {exc.strerror or exc}") from None
    return client_config(parse_properties(text))
