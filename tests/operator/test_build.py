"""The objects the operator writes, checked directly: command lines, schemas, status, health.

Every built object is validated against the Kubernetes OpenAPI schemas (``kubernetes-validate``,
strict: unknown fields fail), the CRD's own schema is exercised with ``jsonschema``, and the
CRD shipped in the Helm chart must equal :func:`build_crd` (one source of truth).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from groupcoord.controlplane.placement import place, placement_from_status
from groupcoord_operator import build, network, resource_status
from groupcoord_operator.crd import build_crd, strict
from groupcoord_operator.health import FAILED, READY, STARTING, placement_candidates, shard_states
from groupcoord_operator.reconcile import is_subset
from groupcoord_operator.spec import SpecError, parse_spec

K8S_VERSION = "1.30"


def openapi_schema() -> dict[str, Any]:
    """The resource's openAPIV3Schema, what jsonschema validates a whole object against."""
    return build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
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
    "stateTopic": {"name": "gc-state", "partitions": 48, "replicationFactor": 5, "minInsyncReplicas": 3},
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
    "gateway": {
        "replicas": 3,
        "listener": {"name": "external", "type": "nodeport", "port": 9192, "brokerPorts": 5},
    },
    "resources": {
        "shard": {"requests": {"memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "cpuPerShardThread": "250m",
    },
    "template": {
        "shard": {
            "metadata": {"labels": {"team": "streaming"}, "annotations": {"example.com/owner": "kafka-team"}},
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "podAffinityTerm": {
                                "topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "shard"}},
                            },
                        }
                    ]
                }
            },
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}
            ],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                }
            ],
            "priorityClassName": "kafka-critical",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "securityContext": {"fsGroup": 10001, "runAsUser": 10001},
            "containerSecurityContext": {"runAsGroup": 10001},
            "env": [
                {"name": "TZ", "value": "UTC"},
                {"name": "POD_NAME", "value": "not-the-operator-s"},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            ],
            "livenessProbe": {"timeoutSeconds": 10, "failureThreshold": 12},
            "readinessProbe": {"initialDelaySeconds": 5},
            "podDisruptionBudget": {"maxUnavailable": 0},
        },
        "gateway": {"priorityClassName": "kafka-critical", "podDisruptionBudget": {"maxUnavailable": 2}},
    },
}
OWNER = {"metadata": {"name": "gc", "namespace": "kafka", "uid": "0f3c9b7e-1111-2222-3333-444455556666"}}


def all_objects(spec_raw):
    spec = parse_spec(spec_raw)
    return [
        build.build_shard_statefulset("gc", "kafka", spec, OWNER),
        build.build_gateway_deployment("gc", "kafka", spec, OWNER),
        *network.build_services("gc", "kafka", spec, OWNER),
        *network.build_pod_disruption_budgets("gc", "kafka", spec, OWNER),
        *network.build_network_policies("gc", "kafka", spec, OWNER),
    ]


@pytest.mark.parametrize("spec_raw", [MINIMAL, FULL, "LISTENERS"], ids=["minimal", "full", "listeners"])
def test_every_built_object_validates_against_kubernetes_schemas(spec_raw):
    spec_raw = LISTENERS if spec_raw == "LISTENERS" else spec_raw
    for obj in all_objects(spec_raw):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        assert obj["metadata"]["ownerReferences"][0]["uid"] == OWNER["metadata"]["uid"]


def test_shard_command_line_matches_the_documented_contract():
    sts = build.build_shard_statefulset("gc", "kafka", parse_spec(FULL))
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["groupcoord"]
    assert container["args"] == [
        "shard", "--shard-id", "$(SHARD_ID)", "--threads", "8", "--kafka", "b1:9093,b2:9093",
        "--state-topic", "gc-state", "--partitions", "48",
        "--replication-factor", "5", "--min-insync-replicas", "3", "--grpc-port", "50051",
        "--metrics-port", "9100", "--drain-timeout", "20", "--leadership", "kubernetes:kafka/gc",
        "--internal-tls-dir", "/etc/groupcoord/internal-tls", "--health-port", "50050",
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
        "gateway", "--port", "9092", "--advertised-host", "$(GROUPCOORD_ADVERTISED_HOST)", "--broker-ports", "3",
        "--kafka", "kafka:9092", "--metrics-port", "9100",
        "--leadership", "kubernetes:kafka/gc",
        "--shard-address-template", "gc-shard-{shard}.gc-shard.kafka.svc:50051",
        "--state-topic", "__groupcoord_state", "--internal-tls-dir", "/etc/groupcoord/internal-tls",
    ]  # fmt: skip
    env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["GROUPCOORD_KAFKA_SECURITY_PROTOCOL"]["value"] == "PLAINTEXT"
    # an internal listener: each pod advertises its own pod IP, never 127.0.0.1
    assert env["GROUPCOORD_ADVERTISED_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    shard_svc, gateway_svc, metrics_svc = network.build_services("gc", "kafka", parse_spec(MINIMAL))
    assert shard_svc["spec"]["clusterIP"] == "None" and shard_svc["spec"]["publishNotReadyAddresses"]
    assert gateway_svc["spec"]["type"] == "ClusterIP"
    # every per-broker listener port (port + 1 + node id) is on the Service and the pod
    ports = {p["name"]: p["port"] for p in gateway_svc["spec"]["ports"]}
    assert ports == {"kafka": 9092, "broker-0": 9093, "broker-1": 9094, "broker-2": 9095}
    # metrics on a ClusterIP Service of their own, never on the client-facing one
    assert metrics_svc["spec"]["type"] == "ClusterIP"
    assert [(p["name"], p["port"]) for p in metrics_svc["spec"]["ports"]] == [("metrics", 9100)]
    container_ports = {
        p["name"]: p["containerPort"] for p in dep["spec"]["template"]["spec"]["containers"][0]["ports"]
    }
    assert container_ports == {**ports, "metrics": 9100}


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
        {**MINIMAL, "threadsPerShard": 0},
        {**MINIMAL, "gateway": {"listener": {"type": "ExternalName"}}},
        {**MINIMAL, "gateway": {"listener": {"brokerPorts": 0}}},
        {**MINIMAL, "stateTopic": {"partitions": 12, "replicationFactor": 0}},
        {**MINIMAL, "template": {"shard": {"tolerations": [{"operator": "Sometimes"}]}}},
    ]
    for spec in bad_specs:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"spec": spec}, schema)
    # unknown fields: the API server prunes them (kubectl's strict field validation refuses
    # them); the operator's strict variant of the same schema refuses them too
    assert "x-kubernetes-preserve-unknown-fields" not in schema["properties"]["spec"]
    for unknown in ({**MINIMAL, "shardz": 3}, {**MINIMAL, "gateway": {"serviceType": "LoadBalancer"}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"spec": unknown}, strict(schema))
        with pytest.raises(SpecError, match="Additional properties are not allowed"):
            parse_spec(unknown)


def test_crd_has_printer_columns_status_and_scale_subresources_and_cel_rules():
    version = build_crd()["spec"]["versions"][0]
    # `kubectl scale groupcoordinator/gc --replicas=5` sets spec.shards
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.shards",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.labelSelector",
        },
    }
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["threadsPerShard"]["minimum"] == 1
    topic = spec["properties"]["stateTopic"]["properties"]
    assert (topic["replicationFactor"]["default"], topic["minInsyncReplicas"]["default"]) == (3, 2)
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
    status = resource_status.build_status(
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
    failed = resource_status.build_status(
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


def containers(obj):
    return obj["spec"]["template"]["spec"]["containers"]


def test_shard_cpu_request_grows_with_threads():
    for threads, cpu in ((1, "600m"), (2, "1100m"), (8, "4100m")):
        sts = build.build_shard_statefulset(
            "gc", "kafka", parse_spec({**MINIMAL, "threadsPerShard": threads})
        )
        assert containers(sts)[0]["resources"]["requests"]["cpu"] == cpu, "500m a worker + 100m supervisor"
    full = build.build_shard_statefulset("gc", "kafka", parse_spec(FULL))
    assert containers(full)[0]["resources"] == {
        "requests": {"memory": "512Mi", "cpu": "2100m"},  # 8 x 250m + 100m
        "limits": {"memory": "1Gi"},
    }
    explicit = {**MINIMAL, "resources": {"shard": {"requests": {"cpu": "3"}}}}
    sts = build.build_shard_statefulset("gc", "kafka", parse_spec(explicit))
    assert containers(sts)[0]["resources"]["requests"]["cpu"] == "3", "an explicit request wins"
    assert build.cpu_millis("1.5") == 1500 and build.cpu_millis("250m") == 250 and build.cpu_millis(2) == 2000


def test_pod_template_overrides_reach_the_pods_and_operator_labels_win():
    spec = parse_spec(
        {
            **FULL,
            "template": {
                **FULL["template"],
                "gateway": {"metadata": {"labels": {"app.kubernetes.io/instance": "x"}}},
            },
        }
    )
    sts = build.build_shard_statefulset("gc", "kafka", spec)
    pod = sts["spec"]["template"]["spec"]
    meta = sts["spec"]["template"]["metadata"]
    assert meta["labels"]["team"] == "streaming" and meta["annotations"]["example.com/owner"] == "kafka-team"
    assert pod["priorityClassName"] == "kafka-critical"
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert "podAntiAffinity" in pod["affinity"]
    # a spread constraint counts this component's pods unless told otherwise
    assert pod["topologySpreadConstraints"][0]["labelSelector"] == {
        "matchLabels": build.selector("gc", "shard")
    }
    dep = build.build_gateway_deployment("gc", "kafka", spec)
    assert dep["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/instance"] == "gc"
    assert "affinity" not in dep["spec"]["template"]["spec"], "overrides are per component"


def test_template_digest_changes_with_threads_only_when_the_pod_changes():
    def digest(raw):
        sts = build.build_shard_statefulset("gc", "kafka", parse_spec(raw))
        return sts["spec"]["template"]["metadata"]["annotations"][build.TEMPLATE_HASH]

    assert digest(MINIMAL) == digest(MINIMAL)
    assert digest(MINIMAL) != digest({**MINIMAL, "threadsPerShard": 4})
    assert digest(MINIMAL) == digest({**MINIMAL, "shards": 7}), "scaling is not a new template"


def test_a_restart_request_is_a_new_pod_template_for_shards_and_gateways():
    def templates(annotations):
        owner = {"metadata": {"name": "gc", "uid": "u", "annotations": annotations}}
        spec = parse_spec(MINIMAL)
        sts = build.build_shard_statefulset("gc", "kafka", spec, owner)["spec"]["template"]
        gw = build.build_gateway_deployment("gc", "kafka", spec, owner)["spec"]["template"]
        return sts, gw

    plain_sts, plain_gw = templates({})
    sts, gw = templates({build.RESTART: "2026-11-27T03:00:00Z"})
    assert build.RESTART not in plain_sts["metadata"]["annotations"] | plain_gw["metadata"]["annotations"]
    assert sts["metadata"]["annotations"][build.RESTART] == gw["metadata"]["annotations"][build.RESTART]
    assert sts["metadata"]["annotations"][build.TEMPLATE_HASH] != plain_sts["metadata"]["annotations"][build.TEMPLATE_HASH]
    assert sts["spec"] == plain_sts["spec"] and gw["spec"] == plain_gw["spec"], "nothing else changes"
    again, _ = templates({build.RESTART: "2026-11-27T03:00:00Z"})
    assert again == sts, "the same request is the same template: no second roll"


def test_a_paused_resource_keeps_its_last_status_and_says_it_is_paused():
    status = resource_status.build_status(
        placement=place(6, [0, 1], None, 0),
        shard_states={0: READY, 1: READY},
        generation=2,
        previous_conditions=None,
        now=NOW,
    )
    assert not build.reconciliation_paused({"metadata": {}})
    assert build.reconciliation_paused({"metadata": {"annotations": {build.PAUSE_RECONCILIATION: "True"}}})
    paused = resource_status.build_paused_status(status, 3, NOW)
    later = resource_status.build_paused_status(paused, 3, NOW + dt.timedelta(minutes=5))
    assert later == paused, "a paused resource's status does not move"
    edited = resource_status.build_paused_status(paused, 4, NOW + dt.timedelta(minutes=6))
    assert edited == paused, "nor when the spec is edited meanwhile (a new generation, a real API server's)"
    by_type = {c["type"]: c for c in paused["conditions"]}
    assert by_type["ReconciliationPaused"]["status"] == "True"
    assert by_type["Ready"] == {c["type"]: c for c in status["conditions"]}["Ready"]
    assert paused["observedGeneration"] == 2, "generation 3 was not acted on"
    assert {k: v for k, v in paused.items() if k != "conditions"} == {
        k: v for k, v in status.items() if k != "conditions"
    }
    jsonschema.validate({"spec": MINIMAL, "status": paused}, strict(openapi_schema()))


@pytest.mark.parametrize(
    ("listener", "service_type", "advertised", "host_port"),
    [
        ({}, "ClusterIP", {"valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}, False),
        ({"type": "nodeport"}, "NodePort", {"valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}, True),
        (
            {"type": "loadbalancer"},
            "LoadBalancer",
            {"valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            False,
        ),
        (
            {"type": "loadbalancer", "advertisedHost": "kafka.example.com"},
            "LoadBalancer",
            {"value": "kafka.example.com"},
            False,
        ),
    ],
    ids=["internal", "nodeport", "loadbalancer-pending", "loadbalancer-named"],
)
def test_listener_types_advertise_a_reachable_address(listener, service_type, advertised, host_port):
    spec = parse_spec({**MINIMAL, "gateway": {"listener": {"brokerPorts": 2, **listener}}})
    dep = build.build_gateway_deployment("gc", "kafka", spec)
    container = containers(dep)[0]
    env = {e["name"]: e for e in container["env"]}
    assert {k: v for k, v in env["GROUPCOORD_ADVERTISED_HOST"].items() if k != "name"} == advertised
    ports = [p for p in container["ports"] if p["name"] != "metrics"]
    assert [p["containerPort"] for p in ports] == [9092, 9093, 9094]
    assert all(("hostPort" in p) == host_port for p in ports)
    assert ("strategy" in dep["spec"]) == host_port, "hostPorts: no surge pod that could not schedule"
    _, svc, _ = network.build_services("gc", "kafka", spec)
    assert svc["spec"]["type"] == service_type
    assert [p["port"] for p in svc["spec"]["ports"]] == [9092, 9093, 9094]
    for obj in (dep, svc):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def ready_pod(name, host_ip, ready=True):
    return {
        "metadata": {"name": name},
        "status": {
            "hostIP": host_ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_status_listeners_name_the_bootstrap_address_per_type():
    internal = resource_status.build_listener_status("gc", "kafka", parse_spec(MINIMAL))
    assert internal == [
        {
            "name": "plain",
            "type": "internal",
            "addresses": [{"host": "gc-gateway.kafka.svc", "port": 9092}],
            "bootstrapServers": "gc-gateway.kafka.svc:9092",
        }
    ]
    nodeport = parse_spec({**MINIMAL, "gateway": {"listener": {"name": "ext", "type": "nodeport"}}})
    pods = [ready_pod("a", "10.0.0.2"), ready_pod("b", "10.0.0.1"), ready_pod("c", "10.0.0.3", ready=False)]
    (entry,) = resource_status.build_listener_status("gc", "kafka", nodeport, pods)
    assert entry["bootstrapServers"] == "10.0.0.1:9092,10.0.0.2:9092", "Ready pods' nodes only"
    lb = parse_spec({**MINIMAL, "gateway": {"listener": {"type": "loadbalancer"}}})
    assert "bootstrapServers" not in resource_status.build_listener_status("gc", "kafka", lb)[0], "never guessed"
    svc = {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}}
    assert (
        resource_status.build_listener_status("gc", "kafka", lb, [], {"plain": svc})[0]["bootstrapServers"]
        == "203.0.113.7:9092"
    )
    hosts = {"plain": resource_status.load_balancer_host(svc)}
    dep = build.build_gateway_deployment("gc", "kafka", lb, load_balancer_hosts=hosts)
    env = {e["name"]: e for e in containers(dep)[0]["env"]}
    assert env["GROUPCOORD_ADVERTISED_HOST"]["value"] == "203.0.113.7"


LISTENERS = {
    **MINIMAL,
    "gateway": {
        "listeners": [
            {"name": "plain", "port": 9092},
            {
                "name": "secure",
                "port": 9192,
                "type": "loadbalancer",
                "brokerPorts": 2,
                "tls": {"secretName": "gateway-tls", "clientAuth": "requested"},
                "authentication": {
                    "mode": "credentials",
                    "credentialsSecret": "gateway-users",
                    "mechanisms": ["SCRAM-SHA-512"],
                },
            },
            {"name": "nodes", "port": 9292, "type": "nodeport", "brokerPorts": 1},
        ]
    },
}


def test_listeners_each_get_ports_a_service_an_address_and_their_own_security():
    """Strimzi's listeners[]: every gateway pod serves all three; the first keeps the names one
    listener always had, so adding listeners renames nothing clients or probes use."""
    spec = parse_spec(LISTENERS)
    assert [listener.name for listener in spec.listeners] == ["plain", "secure", "nodes"]
    dep = build.build_gateway_deployment("gc", "kafka", spec, load_balancer_hosts={"secure": "lb.example.com"})
    (container,) = containers(dep)
    ports = {p["name"]: (p["containerPort"], p.get("hostPort")) for p in container["ports"]}
    assert ports == {
        "kafka": (9092, None), "broker-0": (9093, None), "broker-1": (9094, None), "broker-2": (9095, None),
        "secure": (9192, None), "secure-0": (9193, None), "secure-1": (9194, None),
        "nodes": (9292, 9292), "nodes-0": (9293, 9293),
        "metrics": (9100, None),
    }  # fmt: skip
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}, "hostPorts"
    env = {e["name"]: e for e in container["env"]}
    assert env["GROUPCOORD_ADVERTISED_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["GROUPCOORD_ADVERTISED_HOST_SECURE"]["value"] == "lb.example.com"
    assert env["GROUPCOORD_ADVERTISED_HOST_NODES"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    assert not any(name.startswith("GROUPCOORD_LISTENER_") for name in env), "the first listener is plaintext"
    extra = json.loads(env["GROUPCOORD_EXTRA_LISTENERS"]["value"])
    assert extra == [
        {
            "name": "secure",
            "port": 9192,
            "brokerPorts": 2,
            "advertisedHostEnv": "GROUPCOORD_ADVERTISED_HOST_SECURE",
            "security": {
                "ssl_certfile": "/etc/groupcoord/listeners/secure/tls/tls.crt",
                "ssl_keyfile": "/etc/groupcoord/listeners/secure/tls/tls.key",
                "ssl_client_auth": "requested",
                "ssl_cafile": "/etc/groupcoord/listeners/secure/tls/ca.crt",
                "sasl": "credentials",
                "sasl_mechanisms": "SCRAM-SHA-512",
                "sasl_credentials": "/etc/groupcoord/listeners/secure/sasl-users",
            },
        },
        {"name": "nodes", "port": 9292, "brokerPorts": 1, "advertisedHostEnv": "GROUPCOORD_ADVERTISED_HOST_NODES"},
    ]
    volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    assert volumes["listener-secure-tls"]["secret"]["secretName"] == "gateway-tls"
    assert volumes["listener-secure-sasl-users"]["secret"]["secretName"] == "gateway-users"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["listener-secure-tls"] == "/etc/groupcoord/listeners/secure/tls"

    services = {s["metadata"]["name"]: s for s in network.build_services("gc", "kafka", spec)}
    assert {n: (s["spec"].get("type"), [p["port"] for p in s["spec"]["ports"]]) for n, s in services.items()} == {
        "gc-shard": (None, [50051, 9100]),
        "gc-gateway": ("ClusterIP", [9092, 9093, 9094, 9095]),
        "gc-gateway-metrics": ("ClusterIP", [9100]),
        "gc-gateway-secure": ("LoadBalancer", [9192, 9193, 9194]),
        "gc-gateway-nodes": ("NodePort", [9292, 9293]),
    }
    gateway_policy = network.build_network_policies("gc", "kafka", spec)[1]
    opened = [p["port"] for p in gateway_policy["spec"]["ingress"][0]["ports"]]
    assert opened == [9092, 9093, 9094, 9095, 9192, 9193, 9194, 9292, 9293]

    lb_svc = {"status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}}
    status = resource_status.build_listener_status("gc", "kafka", spec, [ready_pod("a", "10.0.0.5")], {"secure": lb_svc})
    assert [(e["name"], e["type"], e.get("bootstrapServers")) for e in status] == [
        ("plain", "internal", "gc-gateway.kafka.svc:9092"),
        ("secure", "loadbalancer", "lb.example.com:9192"),
        ("nodes", "nodeport", "10.0.0.5:9292"),
    ]


def test_one_listener_in_the_list_builds_what_the_single_listener_built():
    assert all_objects({**MINIMAL, "gateway": {"listener": {"name": "plain", "port": 9092}}}) == all_objects(
        {**MINIMAL, "gateway": {"listeners": [{"name": "plain", "port": 9092}]}}
    )


@pytest.mark.parametrize(
    ("gateway", "message"),
    [
        ({"listener": {}, "listeners": [{"name": "a", "port": 9092}]}, "exclude each other"),
        (
            {"security": {"tls": {"secretName": "t"}}, "listeners": [{"name": "a", "port": 9092}]},
            "set per listener",
        ),
        ({"listeners": [{"name": "a", "port": 9092}, {"name": "a", "port": 9192}]}, "used twice"),
        ({"listeners": [{"name": "a", "port": 9092}, {"name": "b", "port": 9095}]}, "share ports"),
        ({"listeners": [{"name": "kafka", "port": 9092}]}, "the gateway's own ports"),
        ({"listeners": [{"name": "a", "port": 9092, "advertisedHost": "x"}]}, "only for type loadbalancer"),
        (
            {"listeners": [{"name": "a", "port": 9092, "authentication": {"mode": "credentials"}}]},
            "needs credentialsSecret",
        ),
        ({"listeners": [{"name": "a"}]}, "'port' is a required property"),
    ],
)
def test_listeners_the_operator_refuses(gateway, message):
    with pytest.raises(SpecError, match=message):
        parse_spec({**MINIMAL, "gateway": gateway})


def test_pod_disruption_budgets_are_owned_and_allow_one_pod_down():
    budgets = network.build_pod_disruption_budgets("gc", "kafka", parse_spec(MINIMAL), OWNER)
    assert [b["metadata"]["name"] for b in budgets] == ["gc-shard", "gc-gateway"]
    for pdb in budgets:
        assert pdb["spec"]["maxUnavailable"] == 1
        assert pdb["metadata"]["ownerReferences"][0]["kind"] == "GroupCoordinator"
        kubernetes_validate.validate(pdb, K8S_VERSION, strict=True)
    shard, gateway = network.build_pod_disruption_budgets("gc", "kafka", parse_spec(FULL), OWNER)
    assert shard["spec"]["maxUnavailable"] == 0 and gateway["spec"]["maxUnavailable"] == 2


def test_template_security_contexts_env_and_probe_timings_reach_the_containers():
    """Strimzi's template.pod.securityContext, template.container.{securityContext,env} and probe
    timings: merged over the operator's, which keeps what it relies on (its env, its probes' checks)."""
    plain = build.build_shard_statefulset("gc", "kafka", parse_spec(MINIMAL))["spec"]["template"]["spec"]
    pod = build.build_shard_statefulset("gc", "kafka", parse_spec(FULL))["spec"]["template"]["spec"]
    (container,), (plain_container,) = pod["containers"], plain["containers"]
    assert pod["securityContext"] == {**plain["securityContext"], "fsGroup": 10001, "runAsUser": 10001}
    assert container["securityContext"] == {**plain_container["securityContext"], "runAsGroup": 10001}
    env = {e["name"]: e for e in container["env"]}
    assert env["TZ"] == {"name": "TZ", "value": "UTC"}
    assert env["NODE"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}, "the operator's wins"
    assert [e["name"] for e in container["env"]].count("POD_NAME") == 1
    assert container["livenessProbe"] == {**plain_container["livenessProbe"], "timeoutSeconds": 10, "failureThreshold": 12}
    assert container["readinessProbe"] == {**plain_container["readinessProbe"], "initialDelaySeconds": 5}
    gateway = build.build_gateway_deployment("gc", "kafka", parse_spec(FULL))["spec"]["template"]["spec"]
    assert "TZ" not in {e["name"] for e in gateway["containers"][0]["env"]}, "overrides are per component"


def test_status_with_warning_listeners_and_scale_fields_fits_the_crd():
    from groupcoord.common.topic_replication import fit_replication

    replication = fit_replication(3, 2, 1)
    status = resource_status.build_status(
        placement=place(6, [0, 1], None, 0),
        shard_states={0: READY, 1: READY},
        generation=2,
        previous_conditions=None,
        now=NOW,
        warning=("StateTopicReplicationClamped", replication.message),
        listeners=resource_status.build_listener_status("gc", "kafka", parse_spec(MINIMAL)),
        replicas=2,
        label_selector=build.label_selector_string("gc", "shard"),
        replication=replication,
        kafka_brokers=1,
    )
    warning = {c["type"]: c for c in status["conditions"]}["Warning"]
    assert warning["reason"] == "StateTopicReplicationClamped" and "clamped to 1" in warning["message"]
    assert status["stateTopic"] == {"replicationFactor": 1, "minInsyncReplicas": 1, "kafkaBrokers": 1}
    assert status["labelSelector"] == "app.kubernetes.io/component=shard,app.kubernetes.io/instance=gc"
    jsonschema.validate({"spec": MINIMAL, "status": status}, strict(openapi_schema()))


def test_network_policies_open_each_port_to_its_callers_only():
    spec = parse_spec({**FULL, "networkPolicy": {"metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]}})
    shard, gateway = network.build_network_policies("gc", "kafka", spec, OWNER)
    for policy in (shard, gateway):
        kubernetes_validate.validate(policy, K8S_VERSION, strict=True)
        assert policy["spec"]["policyTypes"] == ["Ingress"]
    grpc, health, metrics = shard["spec"]["ingress"]
    # every worker's gRPC port (50051 + i), from gateway pods and the operator's, nobody else
    assert grpc["ports"] == [{"port": 50051, "endPort": 50051 + 8 - 1, "protocol": "TCP"}]
    assert grpc["from"][0] == {"podSelector": {"matchLabels": build.selector("gc", build.GATEWAY)}}
    assert grpc["from"][1]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"
    assert len(grpc["from"]) == 2
    assert health == {"ports": [{"port": build.HEALTH_PORT, "protocol": "TCP"}]}  # the kubelet's probes
    assert metrics["from"] == [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    listeners, gateway_metrics = gateway["spec"]["ingress"]
    assert "from" not in listeners  # clients from anywhere, to the listener ports only
    assert [p["port"] for p in listeners["ports"]] == [p for _, p in build.listener_port_names(spec)]
    assert gateway_metrics == metrics


def test_no_metrics_peers_means_nobody_scrapes_not_everybody():
    spec = parse_spec({**MINIMAL, "networkPolicy": {"metricsFrom": []}})
    for policy in network.build_network_policies("gc", "kafka", spec):
        assert all(rule.get("from") != [] for rule in policy["spec"]["ingress"])
        assert all(p["port"] != build.METRICS_PORT for rule in policy["spec"]["ingress"] for p in rule["ports"])


def test_internal_tls_secrets_are_mounted_the_chart_s_or_the_named_ones():
    spec = parse_spec(MINIMAL)
    for obj, component in (
        (build.build_shard_statefulset("gc", "kafka", spec), build.SHARD),
        (build.build_gateway_deployment("gc", "kafka", spec), build.GATEWAY),
    ):
        pod = obj["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["internal-tls"]["secret"]["secretName"] == f"gc-internal-tls-{component}"
        mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert mounts["internal-tls"] == build.INTERNAL_TLS_MOUNT
    # cert-manager's Secrets named in the spec
    own = parse_spec({**MINIMAL, "internalTls": {"secrets": {"gateway": "gw-cert", "shard": "shard-cert"}}})
    for obj, secret in (
        (build.build_shard_statefulset("gc", "kafka", own), "shard-cert"),
        (build.build_gateway_deployment("gc", "kafka", own), "gw-cert"),
    ):
        volumes = {v["name"]: v for v in obj["spec"]["template"]["spec"]["volumes"]}
        assert volumes["internal-tls"]["secret"]["secretName"] == secret


def test_kubelet_probes_reach_health_on_its_plaintext_port():
    container = build.build_shard_statefulset("gc", "kafka", parse_spec(MINIMAL))["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["grpc"]["port"] == build.HEALTH_PORT
    assert container["livenessProbe"]["grpc"]["port"] == build.HEALTH_PORT
    assert {"name": "health", "containerPort": build.HEALTH_PORT, "protocol": "TCP"} in container["ports"]


def test_spec_logging_format_reaches_shard_and_gateway_pods_as_an_env_var():
    def log_env(spec_raw):
        spec = parse_spec(spec_raw)
        objects = [build.build_shard_statefulset("gc", "kafka", spec), build.build_gateway_deployment("gc", "kafka", spec)]
        containers = [o["spec"]["template"]["spec"]["containers"][0] for o in objects]
        return [[e for e in c["env"] if e["name"] == "GROUPCOORD_LOG_FORMAT"] for c in containers]

    json_env = [{"name": "GROUPCOORD_LOG_FORMAT", "value": "json"}]
    assert log_env({**MINIMAL, "logging": {"format": "json"}}) == [json_env, json_env]
    # text is the processes' default: no variable, so pod templates (and their hash) of
    # resources that never asked for JSON are what they were before spec.logging existed
    assert log_env(MINIMAL) == log_env({**MINIMAL, "logging": {"format": "text"}}) == [[], []]
    with pytest.raises(SpecError, match="spec.logging.format"):
        parse_spec({**MINIMAL, "logging": {"format": "xml"}})
