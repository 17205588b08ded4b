"""The chart's monitoring, rendered by Helm's engine: the PrometheusRule's alerts, proven with
``promtool test rules`` on synthetic series (each fires when it should and not otherwise) and
each linked to its section of docs/runbooks.md, the Grafana dashboard ConfigMap for the
sidecar, and monitors for every component.

The alert rules have one source, the chart's template: these tests render it and feed its
``spec.groups`` to promtool, so what is tested is what is installed.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from real_parts import require_binary

CHART = Path(__file__).resolve().parents[2] / "helm" / "groupcoord"
RUNBOOKS = Path(__file__).resolve().parents[2] / "docs" / "runbooks.md"
DEFAULT_RUNBOOKS = "https://github.com/groupcoord/groupcoord/blob/main/docs/runbooks.md"
ALL_ON = {
    "metrics": {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
        "dashboard": {"enabled": True, "namespace": "monitoring", "annotations": {"grafana_folder": "Kafka"}},
    }
}
SEL = {"namespace": "kafka", "coordinator": "gc-groupcoord"}


@pytest.fixture(scope="module")
def objects() -> list[dict]:
    manifests = helm.Chart.load(CHART).render(ALL_ON, name="gc", namespace="kafka", is_install=True)
    return [
        doc
        for path, text in sorted(manifests.items())
        if not path.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def one(objects: list[dict], kind: str) -> dict:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def test_all_monitoring_on_lints_clean() -> None:
    report = helm.lint(str(CHART), ALL_ON, strict=True, namespace="kafka")
    assert report["errors"] == [] and report["messages"] == [], report


def test_default_install_has_no_monitoring_objects() -> None:
    manifests = helm.Chart.load(CHART).render(None, name="gc", namespace="kafka", is_install=True)
    rendered = "\n".join(manifests.values())
    for kind in ("PrometheusRule", "ServiceMonitor", "PodMonitor", "grafana_dashboard"):
        assert kind not in rendered


def test_every_component_is_scraped(objects: list[dict]) -> None:
    service_monitor = one(objects, "ServiceMonitor")
    components = service_monitor["spec"]["selector"]["matchExpressions"][1]["values"]
    assert components == ["shard", "gateway"]
    targets = {r["targetLabel"] for r in service_monitor["spec"]["endpoints"][0]["relabelings"]}
    assert targets == {"component", "coordinator", "pod"}
    pod_monitor = one(objects, "PodMonitor")
    assert pod_monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"
    assert pod_monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    operator = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "--metrics-port=9100" in operator["args"]
    assert {"name": "metrics", "containerPort": 9100, "protocol": "TCP"} in operator["ports"]


def test_dashboard_configmap_for_the_grafana_sidecar(objects: list[dict]) -> None:
    config_map = one(objects, "ConfigMap")
    kubernetes_validate.validate(config_map, "1.30", strict=True)
    assert config_map["metadata"]["namespace"] == "monitoring"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Kafka"}
    dashboard = json.loads(config_map["data"]["groupcoord.json"])
    assert dashboard == json.loads((CHART / "dashboards" / "groupcoord.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["namespace"]["type"] == "query"
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            assert 'namespace=~"$namespace"' in target["expr"], target["expr"]


def rule_groups(objects: list[dict]) -> list[dict]:
    rule = one(objects, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    return rule["spec"]["groups"]


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a Markdown heading: lowercased, punctuation dropped, spaces
    turned into hyphens (``## GroupcoordShardDown`` -> ``#groupcoordsharddown``)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbook_sections() -> dict[str, str]:
    """docs/runbooks.md's sections (its ``##`` headings, one per alert) by their anchor."""
    headings = re.findall(r"^## (.+)$", RUNBOOKS.read_text(), flags=re.MULTILINE)
    return {github_anchor(h): h.strip() for h in headings}


def test_every_alert_has_a_runbook_and_a_severity(objects: list[dict]) -> None:
    """An on-call engineer who gets any alert can click through to its own section of
    docs/runbooks.md, and that file documents no alert the chart does not have."""
    rules = [r for g in rule_groups(objects) for r in g["rules"]]
    assert {r["alert"] for r in rules} == set(EXPECTED)
    sections = runbook_sections()
    for r in rules:
        assert r["labels"]["severity"] in {"warning", "critical"}
        assert r["annotations"]["summary"]
        assert "runbook" not in r["annotations"], "runbook_url, the name Alertmanager/Grafana link"
        base, _, anchor = r["annotations"]["runbook_url"].partition("#")
        assert base == DEFAULT_RUNBOOKS
        assert anchor == github_anchor(r["alert"]), f"{r['alert']} links to another alert's section"
        assert anchor in sections, f"docs/runbooks.md has no section '## {r['alert']}'"
    stale = set(sections.values()) - {r["alert"] for r in rules}
    assert not stale, f"docs/runbooks.md has sections for alerts the chart does not define: {stale}"


def test_runbook_links_follow_the_base_url_value() -> None:
    """A team that keeps its own copy of the runbooks (a fork, a wiki) points the alerts at it."""
    values = {"metrics": {"prometheusRule": {"enabled": True, "runbookBaseUrl": "https://wiki.example/gc"}}}
    manifests = helm.Chart.load(CHART).render(values, name="gc", namespace="kafka", is_install=True)
    (rule,) = [d for p, t in manifests.items() if "PrometheusRule" in p for d in yaml.safe_load_all(t) if d]
    urls = [r["annotations"]["runbook_url"] for r in rule["spec"]["groups"][0]["rules"]]
    assert urls and all(u.startswith("https://wiki.example/gc#groupcoord") for u in urls)
    with pytest.raises(helm.HelmError):  # the chart adds the fragment itself
        helm.Chart.load(CHART).render(
            {"metrics": {"prometheusRule": {"runbookBaseUrl": "https://wiki.example/gc#alerts"}}},
            name="gc",
            namespace="kafka",
        )


def series(name: str, values: str, **labels: str) -> dict:
    body = ",".join(f'{k}="{v}"' for k, v in {**SEL, **labels}.items())
    return {"series": f"{name}{{{body}}}", "values": values}


def alert(name: str, at: str, *firing: dict[str, str]) -> dict:
    """The alerts named ``name`` firing at ``at``, each with these labels (besides severity)."""
    return {
        "eval_time": at,
        "alertname": name,
        "exp_alerts": [{"exp_labels": {**labels, "severity": SEVERITY[name]}} for labels in firing]
        if firing
        else [],
    }


SEVERITY = {
    "GroupcoordShardDown": "critical",
    "GroupcoordShardWorkerDown": "critical",
    "GroupcoordShardNotReady": "warning",
    "GroupcoordPartitionsWithoutLeader": "critical",
    "GroupcoordPartitionLoadTimeHigh": "warning",
    "GroupcoordEventQueueTimeHigh": "warning",
    "GroupcoordRebalanceStorm": "warning",
    "GroupcoordStateWriteErrors": "critical",
    "GroupcoordConsumerLagHigh": "warning",
    "GroupcoordConsumerLagSecondsHigh": "warning",
}
# alert -> (input series, [alert tests]); every alert is checked before it should fire (nothing),
# when it should (exactly the expected series), and on series that must never fire.
EXPECTED: dict[str, tuple[list[dict], list[dict]]] = {
    "GroupcoordShardDown": (
        [
            series("up", "1 0 0 0 0 0", component="shard", pod="gc-groupcoord-shard-0"),
            series("up", "1 1 1 1 1 1", component="shard", pod="gc-groupcoord-shard-1"),
            series("up", "0 0 0 0 0 0", component="gateway", pod="gc-groupcoord-gateway-x"),
        ],
        [
            alert("GroupcoordShardDown", "2m"),  # down 1 minute: pending
            alert(
                "GroupcoordShardDown",
                "4m",
                {**SEL, "component": "shard", "pod": "gc-groupcoord-shard-0"},
            ),
        ],
    ),
    "GroupcoordShardWorkerDown": (
        [
            series(
                "groupcoord_shard_worker_up",
                "1 1 0 0 0 0",
                shard="0",
                worker="1",
                pod="gc-groupcoord-shard-0",
            ),
            series(
                "groupcoord_shard_worker_up",
                "1 1 1 1 1 1",
                shard="0",
                worker="0",
                pod="gc-groupcoord-shard-0",
            ),
        ],
        [
            alert("GroupcoordShardWorkerDown", "3m"),
            alert(
                "GroupcoordShardWorkerDown",
                "5m",
                {**SEL, "shard": "0", "worker": "1", "pod": "gc-groupcoord-shard-0"},
            ),
        ],
    ),
    "GroupcoordShardNotReady": (
        [
            series("groupcoord_operator_shards", "2x10", state="Ready"),
            series("groupcoord_operator_shards", "0 1x10", state="Starting"),
            series("groupcoord_operator_shards", "0x10", state="Failed"),
        ],
        [
            alert("GroupcoordShardNotReady", "4m"),
            alert("GroupcoordShardNotReady", "7m", {**SEL, "state": "Starting"}),
        ],
    ),
    "GroupcoordPartitionsWithoutLeader": (
        [
            series("groupcoord_gateway_partitions_without_leader", "0 0 3 3 3 0", pod="gw"),
            series("groupcoord_operator_partitions_without_leader", "0 0 0 0 0 0"),
        ],
        [
            alert("GroupcoordPartitionsWithoutLeader", "1m"),
            alert("GroupcoordPartitionsWithoutLeader", "2m"),  # just started: pending
            alert("GroupcoordPartitionsWithoutLeader", "4m", {}),
            alert("GroupcoordPartitionsWithoutLeader", "5m"),  # led again
        ],
    ),
    "GroupcoordPartitionLoadTimeHigh": (
        [
            series("groupcoord_partition_load_time_seconds_max", "5 45 45", shard="0", pod="a"),
            series("groupcoord_partition_load_time_seconds_max", "1 29 29", shard="1", pod="b"),
        ],
        [
            alert("GroupcoordPartitionLoadTimeHigh", "0m"),
            alert("GroupcoordPartitionLoadTimeHigh", "2m", {**SEL, "shard": "0"}),
        ],
    ),
    "GroupcoordEventQueueTimeHigh": (
        [
            # shard 0: nearly every event waits 0.1-1 s (p99 ~ 0.99 s); shard 1: all under 0.1 s
            series("groupcoord_event_queue_time_seconds_bucket", "0+0x20", shard="0", le="0.1"),
            series("groupcoord_event_queue_time_seconds_bucket", "0+100x20", shard="0", le="1.0"),
            series("groupcoord_event_queue_time_seconds_bucket", "0+100x20", shard="0", le="+Inf"),
            series("groupcoord_event_queue_time_seconds_bucket", "0+100x20", shard="1", le="0.1"),
            series("groupcoord_event_queue_time_seconds_bucket", "0+100x20", shard="1", le="1.0"),
            series("groupcoord_event_queue_time_seconds_bucket", "0+100x20", shard="1", le="+Inf"),
        ],
        [
            alert("GroupcoordEventQueueTimeHigh", "8m"),  # high for 7 minutes: pending
            alert("GroupcoordEventQueueTimeHigh", "12m", {**SEL, "shard": "0"}),
        ],
    ),
    "GroupcoordRebalanceStorm": (
        [
            # 10 rebalances a minute for 10 minutes, then 100 a minute (threshold 60)
            series("groupcoord_rebalance_total", "0+10x10 200+100x20", shard="0", protocol="consumer"),
            series("groupcoord_rebalance_total", "0x30", shard="1", protocol="classic"),
        ],
        [
            alert("GroupcoordRebalanceStorm", "10m"),
            alert("GroupcoordRebalanceStorm", "25m", dict(SEL)),
        ],
    ),
    "GroupcoordStateWriteErrors": (
        [
            series(
                "groupcoord_state_write_errors_total", "0 0 0 1 2 3 4 5 6 7 8 9 10", shard="0", partition="3"
            ),
            series(
                "groupcoord_state_write_errors_total", "0 0 1 1 1 1 1 1 1 1 1 1 1", shard="2", partition="5"
            ),
            series("groupcoord_state_write_errors_total", "0x12", shard="1", partition="1"),
        ],
        [
            alert("GroupcoordStateWriteErrors", "6m"),
            alert("GroupcoordStateWriteErrors", "10m", {**SEL, "shard": "0"}),  # one error: never
        ],
    ),
    "GroupcoordConsumerLagHigh": (
        [
            series("groupcoord_consumer_group_lag", "20000x15", shard="0", group="orders", topic="t"),
            series("groupcoord_consumer_group_lag", "9000x15", shard="0", group="billing", topic="t"),
        ],
        [
            alert("GroupcoordConsumerLagHigh", "5m"),
            alert("GroupcoordConsumerLagHigh", "12m", {**SEL, "group": "orders", "topic": "t"}),
        ],
    ),
    "GroupcoordConsumerLagSecondsHigh": (
        [
            series("groupcoord_consumer_group_lag_seconds", "900x15", shard="0", group="orders"),
            series("groupcoord_consumer_group_lag_seconds", "30x15", shard="0", group="billing"),
        ],
        [
            alert("GroupcoordConsumerLagSecondsHigh", "5m"),
            alert("GroupcoordConsumerLagSecondsHigh", "12m", {**SEL, "group": "orders"}),
        ],
    ),
}


def test_promtool_checks_the_rendered_rules(objects: list[dict], tmp_path: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
    rules = tmp_path / "groupcoord-rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups(objects)}))
    done = subprocess.run(
        [promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_alert_fires_when_it_should_and_not_otherwise(objects: list[dict], tmp_path: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
    groups = rule_groups(objects)
    for group in groups:  # promtool compares annotations too; they are checked above
        for r in group["rules"]:
            r.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    tests = [
        {"interval": "1m", "input_series": inputs, "alert_rule_test": checks}
        for inputs, checks in EXPECTED.values()
    ]
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests})
    )
    done = subprocess.run(
        [promtool, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
