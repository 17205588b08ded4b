"""The resource's gateway security and authorization become exactly the variables the
gateway reads, pointing at mounted Secrets and a ConfigMap."""

from __future__ import annotations

import pytest

from groupcoord.authorization import acl_file
from groupcoord.gateway.security import listener_security

build = pytest.importorskip("groupcoord_operator.build")
from groupcoord_operator.spec import SpecError, parse_spec  # noqa: E402

SECURE = {
    "kafka": {"bootstrapServers": "kafka:9093"},
    "stateTopic": {"partitions": 6},
    "shards": 2,
    "gateway": {
        "security": {
            "tls": {"secretName": "gateway-tls", "clientAuth": "required"},
            "sasl": {"mode": "credentials", "mechanisms": ["SCRAM-SHA-512"], "credentialsSecret": "gateway-users",
                     "sessionLifetimeMs": 3600000},
        }
    },
    "authorization": {
        "aclConfigMap": {"name": "gateway-acls"},
        "superUsers": ["User:admin", "User:ops"],
        "allowEveryoneIfNoAclFound": True,
    },
}


def gateway_container(raw: dict) -> tuple[dict, dict]:
    deployment = build.build_gateway_deployment("gc", "kafka", parse_spec(raw))
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def test_gateway_security_becomes_the_variables_the_gateway_reads() -> None:
    pod, container = gateway_container(SECURE)
    env = {e["name"]: e.get("value") for e in container["env"]}
    listener_vars = {n for n in env if n.startswith("GROUPCOORD_LISTENER_")}
    assert listener_vars == set(listener_security.ENV.values())
    acl_vars = {acl_file.ENV_SOURCE, acl_file.ENV_FILE, acl_file.ENV_SUPER_USERS, acl_file.ENV_ALLOW_EVERYONE}
    assert acl_vars <= set(env)
    assert env[acl_file.ENV_ALLOW_EVERYONE] == "true"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["listener-tls"]["secret"]["secretName"] == "gateway-tls"
    assert env["GROUPCOORD_LISTENER_SSL_CERTFILE"] == f"{mounts['listener-tls']}/tls.crt"
    assert env["GROUPCOORD_LISTENER_SSL_CAFILE"] == f"{mounts['listener-tls']}/ca.crt"
    assert volumes["sasl-users"]["secret"]["secretName"] == "gateway-users"
    assert env["GROUPCOORD_LISTENER_SASL_CREDENTIALS"] == mounts["sasl-users"]
    assert volumes["acls"]["configMap"]["name"] == "gateway-acls"
    assert env[acl_file.ENV_FILE] == f"{mounts['acls']}/acls.json"
    assert env[acl_file.ENV_SUPER_USERS] == "User:admin;User:ops"


def test_no_security_adds_nothing() -> None:
    raw = {k: v for k, v in SECURE.items() if k not in ("gateway", "authorization")}
    _, container = gateway_container(raw)
    assert not any(e["name"].startswith(("GROUPCOORD_LISTENER_", "GROUPCOORD_ACL_")) for e in container["env"])


def test_the_shared_upstream_identity_override_is_the_gateways_variable() -> None:
    from groupcoord.gateway.assembly import ENV_ALLOW_SHARED_UPSTREAM_IDENTITY  # noqa: PLC0415

    _, container = gateway_container(SECURE)
    assert ENV_ALLOW_SHARED_UPSTREAM_IDENTITY not in {e["name"] for e in container["env"]}
    raw = {**SECURE, "gateway": {"security": {**SECURE["gateway"]["security"], "allowSharedUpstreamIdentity": True}}}
    _, container = gateway_container(raw)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[ENV_ALLOW_SHARED_UPSTREAM_IDENTITY] == "true"


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"gateway": {"security": {"sasl": {"mode": "credentials"}}}}, "needs credentialsSecret"),
        ({"authorization": {"superUsers": ["User:a"]}}, "needs aclConfigMap"),
        ({"gateway": {"security": {"sasl": {"mode": "trust-me"}}}}, "mode"),
    ],
)
def test_bad_security_specs_are_refused(patch: dict, message: str) -> None:
    raw = {**{k: v for k, v in SECURE.items() if k not in ("gateway", "authorization")}, **patch}
    with pytest.raises(SpecError, match=message):
        parse_spec(raw)


def test_upstream_acl_source_needs_no_config_map() -> None:
    raw = {**SECURE, "authorization": {"aclSource": "upstream"}}
    _, container = gateway_container(raw)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[acl_file.ENV_SOURCE] == "upstream" and acl_file.ENV_FILE not in env
