"""The objects the operator writes, checked directly: command lines, schemas, status, health.

Every built object is validated against the Kubernetes OpenAPI schemas (``kubernetes-validate``,
strict: unknown fields fail), the CRD's own schema is exercised with ``jsonschema``, and the
CRD shipped in the Helm chart must equal :func:`build_crd` (one source of truth).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from groupcoord.controlplane.placement import place, placement_from_status
from groupcoord_operator import build
from groupcoord_operator.crd import build_crd, openapi_schema
from groupcoord_operator.health import FAILED, READY, STARTING, placement_candidates, shard_states
from groupcoord_operator.reconcile import is_subset
from groupcoord_operator.spec import SpecError, parse_spec

K8S_VERSION = "1.30"
ROOT = Path(__file__).resolve().parents[2]
CHART_CRD = ROOT / "helm" / "groupcoord" / "crds" / "groupcoord.io_groupcoordinators.yaml"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

MINIMAL = {"kafka": {"bootstrapServers": "kafka:9092"}, "stateTopic": {"partitions": 12}, "shards": 3}
FULL = {
    "image": "registry.example/groupcoord:1.2.3",
    "serviceAccountName": "groupcoord-workload",
    "kafka": {
        "bootstrapServers": "b1:9093,b2:9093",
        "tls": {
            "enabled": True,
            "caSecret": {"name": "kafka-ca", "key": "ca.crt"},
            "certSecret": {"name": "client", "key": "tls.crt"},
            "keySecret": {"name": "client", "key": "tls.key"},
        },
        "sasl": {
            "mechanism": "SCRAM-SHA-512",
            "usernameSecret": {"name": "kafka-user", "key": "username"},
            "passwordSecret": {"name": "kafka-user", "key": "password"},
        },
    },
    "stateTopic": {"name": "gc-state", "partitions": 48},
    "shards": 4,
    "threadsPerShard": 8,
    "standbysPerPartition": 1,
    "groupDefaults": {
        "sessionTimeoutMs": 30000,
        "heartbeatIntervalMs": 3000,
        "assignors": ["range"],
        "maxGroupSize": 200,
        "migrationPolicy": "upgrade",
    },
    "gateway": {"replicas": 3, "serviceType": "LoadBalancer"},
    "resources": {"shard": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}},
}
OWNER = {"metadata": {"name": "gc", "namespace": "kafka", "uid": "0f3c9b7e-1111-2222-3333-444455556666"}}


def all_objects(spec_raw):
    spec = parse_spec(spec_raw)
    return [
        build.build_shard_statefulset("gc", "kafka", spec, OWNER),
        build.build_gateway_deployment("gc", "kafka", spec, OWNER),
        *build.build_services("gc", "kafka", spec, OWNER),
    ]


@pytest.mark.parametrize("spec_raw", [MINIMAL, FULL], ids=["minimal", "full"])
def test_every_built_object_validates_against_kubernetes_schemas(spec_raw):
    for obj in all_objects(spec_raw):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        assert obj["metadata"]["ownerReferences"][0]["uid"] == OWNER["metadata"]["uid"]


def test_shard_command_line_matches_the_documented_contract():
    sts = build.build_shard_statefulset("gc", "kafka", parse_spec(FULL))
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["groupcoord"]
    assert container["args"] == [
        "shard", "--shard-id", "$(SHARD_ID)", "--threads", "8", "--kafka", "b1:9093,b2:9093",
        "--state-topic", "gc-state", "--partitions", "48", "--grpc-port", "50051",
        "--metrics-port", "9100", "--drain-timeout", "20", "--leadership", "kubernetes:kafka/gc",
    ]  # fmt: skip
    env = {e["name"]: e for e in container["env"]}
    assert env["SHARD_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['apps.kubernetes.io/pod-index']"
    )
    assert env["GROUPCOORD_KAFKA_SECURITY_PROTOCOL"]["value"] == "SASL_SSL"
    assert env["GROUPCOORD_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "kafka-user",
        "key": "password",
    }
    assert env["GROUPCOORD_GROUP_MIGRATION_POLICY"]["value"] == "upgrade"
    assert sts["spec"]["replicas"] == 4
    assert sts["spec"]["serviceName"] == "gc-shard"
    assert sts["spec"]["template"]["spec"]["serviceAccountName"] == "groupcoord-workload"
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert "emptyDir" in volumes["tmp"], "read-only root filesystem: /tmp is the scratch space"
    sources = volumes["kafka-tls"]["projected"]["sources"]
    assert [s["secret"]["name"] for s in sources] == ["kafka-ca", "client", "client"]


def test_gateway_command_line_points_at_per_shard_dns_names():
    dep = build.build_gateway_deployment("gc", "kafka", parse_spec(MINIMAL))
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == [
        "gateway", "--port", "9092", "--kafka", "kafka:9092", "--metrics-port", "9100",
        "--leadership", "kubernetes:kafka/gc",
        "--shard-address-template", "gc-shard-{shard}.gc-shard.kafka.svc:50051",
    ]  # fmt: skip
    env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["GROUPCOORD_KAFKA_SECURITY_PROTOCOL"] == "PLAINTEXT"
    shard_svc, gateway_svc = build.build_services("gc", "kafka", parse_spec(MINIMAL))
    assert shard_svc["spec"]["clusterIP"] == "None" and shard_svc["spec"]["publishNotReadyAddresses"]
    assert {p["name"] for p in gateway_svc["spec"]["ports"]} == {"kafka", "metrics"}


def test_building_twice_gives_identical_objects():
    assert all_objects(FULL) == all_objects(FULL)


def test_chart_crd_is_the_operator_crd():
    assert yaml.safe_load(CHART_CRD.read_text()) == build_crd()


def test_crd_schema_accepts_good_and_rejects_bad_resources():
    schema = openapi_schema()
    for spec in (MINIMAL, FULL):
        jsonschema.validate(
            {"apiVersion": "groupcoord.io/v1alpha1", "kind": "GroupCoordinator", "spec": spec}, schema
        )
    bad_specs = [
        {**MINIMAL, "shards": 0},
        {**MINIMAL, "threadsPerShard": 65},
        {**MINIMAL, "stateTopic": {"partitions": 0}},
        {**MINIMAL, "groupDefaults": {"migrationPolicy": "sideways"}},
        {**MINIMAL, "groupDefaults": {"assignors": ["sticky"]}},
        {**MINIMAL, "kafka": {}},
        {**MINIMAL, "gateway": {"serviceType": "ExternalName"}},
    ]
    for spec in bad_specs:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"spec": spec}, schema)


def test_crd_has_printer_columns_status_subresource_and_cel_rules():
    version = build_crd()["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert names[:3] == ["Partitions", "Shards", "Threads"] and "Ready" in names
    spec_schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec_schema["properties"]["stateTopic"]["properties"]["partitions"]["x-kubernetes-validations"]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"shards": 0}, "spec.shards"),
        ({"groupDefaults": {"sessionTimeoutMs": 5000, "heartbeatIntervalMs": 5000}}, "heartbeatIntervalMs"),
        ({"standbysPerPartition": 3}, "standbysPerPartition (3) must be smaller than spec.shards (3)"),
        ({"groupDefaults": {"migrationPolicy": "sideways"}}, "spec.groupDefaults.migrationPolicy"),
    ],
)
def test_invalid_specs_explain_themselves(change, fragment):
    with pytest.raises(SpecError, match=".*") as info:
        parse_spec({**MINIMAL, **change})
    assert fragment in str(info.value)


def test_partition_count_is_fixed_once_placed():
    for other in (6, 24):
        with pytest.raises(SpecError, match=f"cannot change from 12 to {other}"):
            parse_spec({**MINIMAL, "stateTopic": {"partitions": other}}, current_partitions=12)
    assert parse_spec(MINIMAL, current_partitions=12).partitions == 12
    assert parse_spec(MINIMAL, current_partitions=0).partitions == 12, "a new resource picks its count"


def pod(index, ready, **status):
    return {
        "metadata": {"name": f"gc-shard-{index}", "labels": {"apps.kubernetes.io/pod-index": str(index)}},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}], **status},
    }


def test_shard_health_only_fails_shards_that_were_up():
    # fresh install: nothing ready yet, nobody has failed
    assert shard_states(3, [pod(0, False)], {}) == {0: STARTING, 1: STARTING, 2: STARTING}
    states = shard_states(3, [pod(0, True), pod(1, True), pod(2, False)], {})
    assert states == {0: READY, 1: READY, 2: STARTING}
    # shard 1 was ready and now is not; shard 0's pod vanished
    after = shard_states(3, [pod(1, False), pod(2, True)], states)
    assert after == {0: FAILED, 1: FAILED, 2: READY}
    # a crash-looping container fails even a shard that was never up
    crashing = pod(0, False, containerStatuses=[{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}])
    assert shard_states(1, [crashing], {}) == {0: FAILED}
    # recovery
    assert shard_states(3, [pod(0, True), pod(1, True), pod(2, True)], after) == dict.fromkeys(
        range(3), READY
    )


def test_new_shards_lead_only_once_ready_but_a_fresh_install_places_at_once():
    # fresh install: nobody ready, everybody may lead
    assert placement_candidates({0: STARTING, 1: STARTING}, []) == [0, 1]
    # shard 0 up first: shard 1 keeps what it was given at install
    assert placement_candidates({0: READY, 1: STARTING}, [0, 1]) == [0, 1]
    # scale-out: shard 2 leads nothing yet, so it waits until Ready
    assert placement_candidates({0: READY, 1: READY, 2: STARTING}, [0, 1]) == [0, 1]
    assert placement_candidates({0: READY, 1: READY, 2: READY}, [0, 1]) == [0, 1, 2]
    # failed shards never lead; if nobody is Ready, a starting replacement may
    assert placement_candidates({0: FAILED, 1: READY}, [0, 1]) == [1]
    assert placement_candidates({0: FAILED, 1: STARTING}, [0]) == [1]


def test_status_carries_leadership_and_conditions():
    placement = place(6, [0, 1, 2], None, 1)
    status = build.build_status(
        placement=placement,
        shard_states={0: READY, 1: READY, 2: READY},
        generation=4,
        previous_conditions=None,
        now=NOW,
    )
    assert placement_from_status(status["partitions"]) == placement
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "True"
    assert conditions["Degraded"]["status"] == "False"
    assert status["observedGeneration"] == 4 and status["readyShards"] == 3
    jsonschema.validate({"spec": MINIMAL, "status": status}, openapi_schema())

    later = NOW + dt.timedelta(minutes=5)
    failed = build.build_status(
        placement=placement,
        shard_states={0: READY, 1: FAILED, 2: READY},
        generation=4,
        previous_conditions=status["conditions"],
        now=later,
    )
    conditions2 = {c["type"]: c for c in failed["conditions"]}
    assert conditions2["Degraded"]["status"] == "True" and "[1]" in conditions2["Degraded"]["message"]
    assert conditions2["Degraded"]["lastTransitionTime"] == "2026-01-01T00:05:00Z"
    assert conditions2["Progressing"]["lastTransitionTime"] == "2026-01-01T00:00:00Z", "unchanged: kept"


def test_is_subset_tolerates_server_defaults_but_not_changes():
    desired = {"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "a", "args": ["x"]}]}}}}
    actual = {
        "spec": {
            "replicas": 3,
            "revisionHistoryLimit": 10,
            "template": {
                "spec": {"containers": [{"name": "a", "args": ["x"], "terminationMessagePath": "/t"}]}
            },
        }
    }
    assert is_subset(desired, actual)
    actual["spec"]["template"]["spec"]["containers"][0]["args"] = ["y"]
    assert not is_subset(desired, actual)


def test_print_crd_regenerates_the_chart_file_byte_for_byte(capsys):
    from groupcoord.cli import main

    assert main(["operator", "--print-crd"]) == 0
    assert capsys.readouterr().out == CHART_CRD.read_text()
