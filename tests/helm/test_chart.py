"""The Helm chart, rendered by Helm's own engine (helm-python-sdk, no helm binary, no cluster).

For default and non-default values: lint is clean (strict), every rendered object validates
against the Kubernetes schemas (kubernetes-validate, strict), the GroupCoordinator validates
against the CRD's openAPIV3Schema (jsonschema), and the CRD under crds/ — which Helm's render
leaves out — is validated on its own. Custom kinds the Kubernetes schemas do not know
(GroupCoordinator, ServiceMonitor) are checked by other means, named below.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

from groupcoord_operator.crd import build_crd, strict
from groupcoord_operator.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "groupcoord"
K8S_VERSION = "1.30"


def openapi_schema() -> dict[str, Any]:
    """The resource's openAPIV3Schema, what jsonschema validates a whole object against."""
    return build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

NON_DEFAULT = {
    "image": {"registry": "", "repository": "registry.example/gc", "tag": "1.2.3", "pullPolicy": "Always"},
    "imagePullSecrets": [{"name": "regcred"}],
    "operator": {
        "replicas": 3,
        "watchNamespaces": ["team-a", "team-b"],
        "resyncSeconds": 30,
        "logFormat": "json",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}],
    },
    "crds": {"upgrade": False},
    "coordinator": {
        "name": "orders",
        "kafka": {
            "bootstrapServers": "b1:9093,b2:9093",
            "tls": {"enabled": True, "caSecret": {"name": "kafka-ca", "key": "ca.crt"}},
            "sasl": {
                "mechanism": "SCRAM-SHA-512",
                "usernameSecret": {"name": "kafka-user", "key": "username"},
                "passwordSecret": {"name": "kafka-user", "key": "password"},
            },
        },
        "shards": 6,
        "threadsPerShard": 8,
        "standbysPerPartition": 2,
        "groupDefaults": {"migrationPolicy": "upgrade", "assignors": ["range"]},
        "gateway": {
            "replicas": 3,
            "listener": None,  # the chart's single default listener, replaced by the list
            "listeners": [
                {
                    "name": "external",
                    "type": "loadbalancer",
                    "port": 9092,
                    "brokerPorts": 5,
                    "tls": {"secretName": "gateway-tls"},
                    "authentication": {"mode": "credentials", "credentialsSecret": "gateway-users"},
                },
                {"name": "plain", "port": 9192},
            ],
        },
        "stateTopic": {"partitions": 48, "replicationFactor": 5, "minInsyncReplicas": 3},
        "logging": {"format": "json"},
        "template": {
            "shard": {
                "priorityClassName": "kafka-critical",
                "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                    }
                ],
                "affinity": {"nodeAffinity": {}},
                "metadata": {"annotations": {"example.com/team": "streaming"}},
            }
        },
    },
    "metrics": {
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "prometheusRule": {"enabled": True, "consumerLag": 500, "consumerLagFor": "15m"},
        "dashboard": {"enabled": True},
    },
}
ALL_NAMESPACES = {"operator": {"watchAllNamespaces": True}, "coordinator": {"create": False}}


@pytest.fixture(scope="module")
def chart() -> helm.Chart:
    return helm.Chart.load(CHART)


def render(chart: helm.Chart, values: dict | None) -> tuple[list[dict], str]:
    manifests = chart.render(values, name="gc", namespace="kafka", is_install=True)
    objects = []
    notes = ""
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects, notes


def kinds(objects: list[dict]) -> list[str]:
    return [o["kind"] for o in objects]


@pytest.mark.parametrize(
    "values", [None, NON_DEFAULT, ALL_NAMESPACES], ids=["default", "custom", "cluster-wide"]
)
def test_chart_lints_clean(values):
    report = helm.lint(str(CHART), values, strict=True, namespace="kafka")
    assert report["errors"] == [] and report["messages"] == [], report


@pytest.mark.parametrize(
    "values", [None, NON_DEFAULT, ALL_NAMESPACES], ids=["default", "custom", "cluster-wide"]
)
def test_every_rendered_object_validates(chart, values):
    objects, _ = render(chart, values)
    custom = {"GroupCoordinator", "ServiceMonitor", "PodMonitor", "PrometheusRule"}  # see test_monitoring.py
    for obj in objects:
        if obj["kind"] in custom:
            continue
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    for obj in objects:
        if obj["kind"] == "GroupCoordinator":
            jsonschema.validate(obj, openapi_schema())
            parse_spec(obj["spec"])  # and the operator accepts it (CEL-equivalent rules too)
        if obj["kind"] == "ServiceMonitor":  # not in the Kubernetes schemas: check its essentials
            assert obj["apiVersion"] == "monitoring.coreos.com/v1"
            assert obj["spec"]["endpoints"][0]["port"] == "metrics"


#: kinds whose CRDs belong to other projects (the Prometheus operator): test_monitoring.py checks them
FOREIGN_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}


@pytest.mark.parametrize(
    "values", [None, NON_DEFAULT, ALL_NAMESPACES], ids=["default", "custom", "cluster-wide"]
)
async def test_a_real_api_server_accepts_every_rendered_object(values, kube_apiserver):
    """Every object the chart renders, sent to a real ``kube-apiserver`` (the chart's CRD
    installed) as a server-side dry run: the server's own validation, defaulting and admission
    judge each one, as ``helm install --dry-run=server`` would, and nothing is kept. The
    namespaces the chart names exist first, as they must on a cluster."""
    from tests.operator.kube_apiserver import RESOURCES, collection, install_crd  # noqa: PLC0415

    objects, _ = render(helm.Chart.load(CHART), values)
    async with kube_apiserver.admin_session() as admin:
        await install_crd(admin)
        namespaces = {"kafka"} | {o["metadata"]["namespace"] for o in objects if o["metadata"].get("namespace")}
        for name in sorted(namespaces):
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            async with admin.post("/api/v1/namespaces", json=body) as resp:
                assert resp.status in (201, 409), await resp.text()
        refused = []
        for obj in objects:
            if obj["kind"] in FOREIGN_KINDS:
                continue
            kind = obj["kind"]
            path = collection(kind, obj["metadata"].get("namespace", "kafka")) if kind in RESOURCES else None
            if path is None:  # Job, ConfigMap: not in the helper's table
                group_version = obj["apiVersion"]
                prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
                path = f"{prefix}/namespaces/{obj['metadata'].get('namespace', 'kafka')}/{kind.lower()}s"
            async with admin.post(path, params={"dryRun": "All"}, json=obj) as resp:
                if resp.status != 201:
                    refused.append((kind, obj["metadata"]["name"], resp.status, (await resp.json()).get("message")))
        assert refused == []


def test_crds_directory_holds_a_valid_crd_equal_to_the_operators(chart):
    crds = chart.crds
    assert [c["name"] for c in crds] == ["crds/groupcoord.io_groupcoordinators.yaml"]
    crd = yaml.safe_load(crds[0]["data"])
    kubernetes_validate.validate(crd, K8S_VERSION, strict=True)
    assert crd == build_crd()


def test_default_install_reads_in_install_order_and_is_namespaced(chart):
    objects, notes = render(chart, None)
    assert kinds(objects) == [
        "ServiceAccount",
        "ClusterRole", "ClusterRoleBinding",  # read-only observer of CRDs and namespaces
        "Role", "RoleBinding",  # what the operator writes, in its namespace only
        "Role", "RoleBinding",  # the leader-election Lease
        "ClusterRole", "ClusterRole",  # for people: aggregated into admin/edit and view
        "ServiceAccount", "Role", "RoleBinding",  # workloads read leadership
        "Deployment", "PodDisruptionBudget",
        "Secret", "Secret",  # mutual TLS between gateway and shards, before the pods mounting them
        "GroupCoordinator",
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job",  # CRD upgrade hook
    ]  # fmt: skip
    observer = next(o for o in objects if o["kind"] == "ClusterRole")
    assert all(set(rule["verbs"]) <= {"list", "watch"} for rule in observer["rules"])
    gc = next(o for o in objects if o["kind"] == "GroupCoordinator")
    assert gc["spec"]["shards"] == 3 and gc["metadata"]["namespace"] == "kafka"
    assert "bootstrap.servers=gc-groupcoord-gateway.kafka.svc:9092" in notes
    assert "jsonpath='{.status.listeners[*].bootstrapServers}'" in notes
    assert "scale groupcoordinator gc-groupcoord --replicas=5" in notes
    assert "9100" in notes and "ServiceMonitor" not in notes.split("4. Metrics")[0]


def test_least_privilege_rbac(chart):
    objects, _ = render(chart, None)
    bound = {o["roleRef"]["name"] for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")}
    roles = [o for o in objects if o["kind"] in ("Role", "ClusterRole")]
    unbound = {r["metadata"]["name"] for r in roles} - bound
    assert unbound == {"gc-groupcoord-admin", "gc-groupcoord-view"}, "only the roles for people"
    for role in (r for r in roles if r["metadata"]["name"] in bound):  # the chart's own accounts
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"]
            # the operator deletes nothing but the Service of a listener removed from the spec (a
            # LoadBalancer left behind would keep a port open to the world); owner references do the rest
            assert "delete" not in rule["verbs"] or rule["resources"] == ["services"], rule
            assert "secrets" not in rule["resources"]
    operator_role = next(
        o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "gc-groupcoord-operator"
    )
    granted = {
        (g, r) for rule in operator_role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
    }
    assert {("policy", "poddisruptionbudgets"), ("", "services"), ("apps", "statefulsets")} <= granted
    lease_role = next(
        o for o in objects if o["metadata"]["name"].endswith("leader-election") and o["kind"] == "Role"
    )
    updates = [r for r in lease_role["rules"] if "patch" in r["verbs"]]
    assert updates[0]["resourceNames"] == ["gc-groupcoord-operator"]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["GROUPCOORD_OPERATOR_LEASE"]["value"] == "gc-groupcoord-operator"


ADMIN_VERBS = {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"


def granted(role: dict) -> dict[str, set[str]]:
    """resource -> verbs a role grants in groupcoord.io (the only group it may name)."""
    verbs: dict[str, set[str]] = {}
    for rule in role["rules"]:
        assert rule["apiGroups"] == ["groupcoord.io"]
        for resource in rule["resources"]:
            verbs.setdefault(resource, set()).update(rule["verbs"])
    return verbs


def test_namespace_admins_editors_and_viewers_get_groupcoordinators(chart):
    """As with Deployments (and Strimzi's Kafka resources): whoever is admin or editor of a
    namespace creates, scales and deletes its GroupCoordinators, a viewer reads them, and nobody
    but the operator writes their status — all through Kubernetes' aggregated roles."""
    crd = yaml.safe_load((CHART / "crds" / "groupcoord.io_groupcoordinators.yaml").read_text())
    assert (crd["spec"]["group"], crd["spec"]["names"]["plural"]) == ("groupcoord.io", "groupcoordinators")
    objects, _ = render(chart, None)
    aggregated = {
        aggregate.removeprefix(AGGREGATE): role
        for role in objects
        if role["kind"] == "ClusterRole"
        for aggregate, value in role["metadata"]["labels"].items()
        if aggregate.startswith(AGGREGATE) and value == "true"
    }
    assert sorted(aggregated) == ["admin", "edit", "view"]
    for who in ("admin", "edit"):
        verbs = granted(aggregated[who])
        assert verbs["groupcoordinators"] == ADMIN_VERBS
        assert {"patch", "update"} <= verbs["groupcoordinators/scale"], "kubectl scale"
        assert verbs.get("groupcoordinators/status", set()) <= {"get", "list", "watch"}
    view = granted(aggregated["view"])
    assert {"groupcoordinators", "groupcoordinators/status"} <= set(view)
    assert all(verbs <= {"get", "list", "watch"} for verbs in view.values()), view
    for role in aggregated.values():
        kubernetes_validate.validate(role, K8S_VERSION, strict=True)
    off, _ = render(chart, {"rbac": {"aggregatedRoles": {"enabled": False}}})
    assert not [o for o in off for label in o["metadata"].get("labels", {}) if label.startswith(AGGREGATE)]


def test_custom_values_reach_the_resource_and_rbac(chart):
    objects, notes = render(chart, NON_DEFAULT)
    gc = next(o for o in objects if o["kind"] == "GroupCoordinator")
    assert gc["metadata"]["name"] == "orders"
    assert gc["spec"]["threadsPerShard"] == 8 and gc["spec"]["shards"] == 6
    assert gc["spec"]["image"] == "registry.example/gc:1.2.3"
    assert gc["spec"]["kafka"]["sasl"]["mechanism"] == "SCRAM-SHA-512"
    roles = [o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "gc-groupcoord-operator"]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--namespace=team-b" in args
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["GROUPCOORD_LOG_FORMAT"] == "json", "operator.logFormat"
    assert gc["spec"]["logging"] == {"format": "json"}, "the shards' and gateways' (spec.logging)"
    monitor = next(o for o in objects if o["kind"] == "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    rules = {
        r["alert"]: r
        for o in objects
        if o["kind"] == "PrometheusRule"
        for r in o["spec"]["groups"][0]["rules"]
    }
    lag = rules["GroupcoordConsumerLagHigh"]
    assert lag["expr"].endswith("> 500") and lag["for"] == "15m" and 'coordinator="orders"' in lag["expr"]
    assert "Job" not in kinds(objects), "crds.upgrade=false: no hook"
    assert "kubectl apply --server-side" in notes
    assert "type loadbalancer" in notes and "load balancer is assigned" in notes
    assert "bootstrap.servers=" not in notes, "an external address is not known before install"
    assert "listener" not in gc["spec"]["gateway"]
    assert [(entry["name"], entry["port"]) for entry in gc["spec"]["gateway"]["listeners"]] == [
        ("external", 9092), ("plain", 9192)
    ]  # fmt: skip
    assert 'listener "external"' in notes, "the notes name the first listener"
    assert gc["spec"]["stateTopic"]["replicationFactor"] == 5
    assert gc["spec"]["template"]["shard"]["priorityClassName"] == "kafka-critical"


def test_cluster_wide_mode_uses_cluster_roles_only(chart):
    objects, notes = render(chart, ALL_NAMESPACES)
    assert "GroupCoordinator" not in kinds(objects)
    assert not [
        o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "gc-groupcoord-operator"
    ]
    assert [
        o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "gc-groupcoord-operator"
    ]
    assert "all namespaces" in notes


def test_an_image_by_digest_reaches_the_operator_and_the_resource(chart):
    digest = "sha256:" + "ab" * 32
    objects, _ = render(chart, {"image": {"registry": "registry.example", "repository": "gc", "tag": "1.2.3", "digest": digest}})
    pinned = f"registry.example/gc@{digest}"
    assert next(o for o in objects if o["kind"] == "GroupCoordinator")["spec"]["image"] == pinned
    (operator,) = [o for o in objects if o["kind"] == "Deployment"]
    container = operator["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == pinned
    assert pinned in {e.get("value") for e in container["env"]}, "the image the operator gives the pods"


@pytest.mark.parametrize(
    "bad",
    [
        {"coordinator": {"shards": 0}},
        {"coordinator": {"threadsPerShard": 1000}},
        {"coordinator": {"threadsPerShard": 0}},
        {"coordinator": {"gateway": {"serviceType": "LoadBalancer"}}},  # unknown keys are refused
        {"coordinator": {"gateway": {"listener": {"type": "ingress"}}}},
        {"coordinator": {"stateTopic": {"partitions": 12, "replicationFactor": 0}}},
        {"coordinator": {"groupDefaults": {"migrationPolicy": "sideways"}}},
        {"operator": {"replicas": 0}},
        {"metrics": {"serviceMonitor": {"interval": "soon"}}},
        {"metrics": {"prometheusRule": {"consumerLagFor": "soon"}}},
        {"metrics": {"prometheusRule": {"eventQueueSeconds": 0}}},
        {"metrics": {"dashboard": {"color": "red"}}},
        {"image": {"repository": "gc", "digest": "latest"}},
        {"unknownKey": 1},
    ],
)
def test_values_schema_rejects_bad_values(chart, bad):
    with pytest.raises(helm.HelmError):
        chart.render(bad, name="gc", namespace="kafka")


def test_values_schema_documents_every_key():
    schema = json.loads((CHART / "values.schema.json").read_text())
    missing = []

    def walk(node: dict, where: str) -> None:
        for key, sub in (node.get("properties") or {}).items():
            if "description" not in sub:
                missing.append(f"{where}{key}")
            walk(sub, f"{where}{key}.")
        for sub in (node.get("items"), node.get("additionalProperties")):
            if isinstance(sub, dict):
                walk(sub, f"{where}[].")

    walk(schema, "")
    assert missing == []
    coordinator = schema["properties"]["coordinator"]["properties"]
    crd_spec = openapi_schema()["properties"]["spec"]["properties"]
    assert set(coordinator) - {"create", "name"} == set(crd_spec)
    for key, sub in crd_spec.items():  # same rules as the CRD (CEL-only keys aside), unknown keys refused
        assert coordinator[key] == without_kubernetes_extensions(strict(sub)), (
            f"{key}: run scripts/sync_chart_values_schema.py"
        )


def without_kubernetes_extensions(node):
    if isinstance(node, dict):
        return {
            k: without_kubernetes_extensions(v) for k, v in node.items() if not k.startswith("x-kubernetes")
        }
    if isinstance(node, list):
        return [without_kubernetes_extensions(v) for v in node]
    return node


def test_the_operator_pdb_exists_only_with_replicas_to_spare(chart):
    objects, _ = render(chart, None)
    (pdb,) = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"
    single, _ = render(chart, {"operator": {"replicas": 1}})
    assert "PodDisruptionBudget" not in kinds(single), "a lone replica: a budget would only block drains"


def _internal_tls_secrets(objects: list[dict]) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "Secret"}


def test_the_internal_mtls_secrets_render_with_one_ca_and_serve_mutual_tls(chart):
    """The generated Secrets hold certificates a real shard accepts: a gRPC server with the
    shard's and the caller check serves the gateway's certificate, refuses a plaintext caller."""
    import asyncio  # noqa: PLC0415
    import base64  # noqa: PLC0415

    import grpc  # noqa: PLC0415
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # noqa: PLC0415

    from groupcoord.common.internal_tls import CallerCheck, InternalTls  # noqa: PLC0415

    objects, _ = render(chart, None)
    secrets = _internal_tls_secrets(objects)
    assert sorted(secrets) == ["gc-groupcoord-internal-tls-gateway", "gc-groupcoord-internal-tls-shard"]
    tls = {}
    for name, secret in secrets.items():
        kubernetes_validate.validate(secret, K8S_VERSION, strict=True)
        assert secret["type"] == "kubernetes.io/tls"
        tls[name.rsplit("-", 1)[1]] = InternalTls(
            *(base64.b64decode(secret["data"][k]) for k in ("ca.crt", "tls.crt", "tls.key"))
        )
    assert tls["gateway"].ca == tls["shard"].ca
    gc = next(o for o in objects if o["kind"] == "GroupCoordinator")
    sts = __import__("groupcoord_operator.build", fromlist=["build"]).build_shard_statefulset(
        gc["metadata"]["name"], "kafka", parse_spec(gc["spec"])
    )
    mounted = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}["internal-tls"]
    assert mounted["secret"]["secretName"] in secrets  # what the operator mounts is what the chart made

    async def calls() -> tuple[int, grpc.StatusCode]:
        server = grpc.aio.server(interceptors=[CallerCheck()])
        health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
        port = server.add_secure_port("127.0.0.1:0", tls["shard"].server_credentials())
        await server.start()
        try:
            request = health_pb2.HealthCheckRequest(service="")
            async with tls["gateway"].channel(f"127.0.0.1:{port}") as channel:
                served = (await health_pb2_grpc.HealthStub(channel).Check(request, timeout=5)).status
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                try:
                    await health_pb2_grpc.HealthStub(channel).Check(request, timeout=5)
                except grpc.aio.AioRpcError as exc:
                    return served, exc.code()
            raise AssertionError("a plaintext caller was served")
        finally:
            await server.stop(None)

    served, refused = asyncio.run(calls())
    assert served == health_pb2.HealthCheckResponse.SERVING
    assert refused is grpc.StatusCode.UNAVAILABLE


def test_cert_manager_or_named_secrets_replace_the_generated_ones(chart):
    issuer = {"name": "internal-ca", "kind": "Issuer"}
    objects, _ = render(chart, {"internalTls": {"certManager": {"enabled": True, "issuerRef": issuer}}})
    assert _internal_tls_secrets(objects) == {}
    certificates = {o["spec"]["commonName"]: o for o in objects if o["kind"] == "Certificate"}
    assert sorted(certificates) == ["groupcoord-gateway", "groupcoord-shard"]
    for identity, cert in certificates.items():
        assert cert["spec"]["issuerRef"] == issuer and cert["spec"]["dnsNames"] == [identity]
        assert {"server auth", "client auth"} <= set(cert["spec"]["usages"])
    secrets = {"gateway": "gw-cert", "shard": "shard-cert"}
    objects, _ = render(chart, {"coordinator": {"internalTls": {"secrets": secrets}}})
    assert _internal_tls_secrets(objects) == {}
    assert not [o for o in objects if o["kind"] == "Certificate"]


# A repository path on its own (`docs/metrics.md`, `tests/helm/...`) or in a URL of this
# repository's main branch (Chart.yaml's icon, the runbooks' base URL).
REPO_PATH = re.compile(r"(?<![\w/.-])(?:docs|tests|scripts|helm|services|operator|spark)/[\w./-]*\w")
REPO_URL = re.compile(
    r"https://(?:raw\.githubusercontent\.com/groupcoord/groupcoord/main"
    r"|github\.com/groupcoord/groupcoord/(?:blob|tree)/main)/([\w./-]*\w)"
)


def test_every_repository_path_the_chart_names_exists():
    """A comment citing a test, a value pointing at a doc, the icon Artifact Hub shows: each
    names a file a reader can open (a rename must take them along)."""
    named = {}
    for file in sorted(p for p in CHART.rglob("*") if p.is_file()):
        text = file.read_text()
        for path in REPO_PATH.findall(text) + REPO_URL.findall(text):
            named.setdefault(path, file.relative_to(ROOT).as_posix())
    missing = {path: where for path, where in named.items() if not (ROOT / path).exists()}
    assert missing == {}, "named in the chart (path: where) but not in the repository"
    icon = yaml.safe_load((CHART / "Chart.yaml").read_text())["icon"]
    assert {icon.split("/main/", 1)[1], "docs/runbooks.md", "docs/metrics.md"} <= set(named), named
