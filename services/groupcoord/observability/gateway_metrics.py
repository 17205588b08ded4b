"""The metrics facade the gateway calls."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from groupcoord.observability.families import ApiLabel, families_of


class PartitionLeaders(Protocol):
    """What the metrics read of the gateway's leadership table
    (:class:`groupcoord.gateway.groups.leadership.LeadershipTable`): its partition count and
    each partition's leader address, None while it has none. Declared here so that
    observability never imports the gateway (the gateway hands its table in)."""

    @property
    def partitions(self) -> int: ...

    def address_of(self, partition: int) -> tuple[str, int] | None: ...


class GatewayMetrics:
    """Request latency per API at the gateway, labelled with the shard that served the request
    (``""`` for APIs forwarded to the upstream Kafka cluster). It shares the
    ``groupcoord_request_latency_seconds`` family with the shards (``component="gateway"``), so
    one query compares the latency a client sees with the part the shard spent."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = REGISTRY if registry is None else registry
        self._families = families_of(self.registry)
        self._apis = ApiLabel()

    def observe_request(self, api: str, seconds: float, *, shard: str = "") -> None:
        self._families.request_latency.labels("gateway", str(shard), self._apis(api)).observe(seconds)

    def observe_adoption(self, outcome: str) -> None:
        """A group's first touch at this gateway process, by what its adoption found."""
        self._families.group_adoptions.labels(outcome).inc()

    def observe_offset_mirror(self, result: str, partitions: int) -> None:
        """``partitions`` offsets written upstream by the offset mirror, with ``result``."""
        if partitions:
            self._families.offset_mirror.labels(result).inc(partitions)

    def watch_leadership(self, table: PartitionLeaders) -> None:
        """Export how many of ``table``'s partitions have no leader (for the alert rules)."""
        with _LEADERSHIP_LOCK:
            collector = _LEADERSHIP.get(self.registry)
            if collector is None:
                collector = _LEADERSHIP[self.registry] = LeadershipCollector()
                self.registry.register(collector)
        collector.add(table)


class LeadershipCollector(Collector):
    """``groupcoord_gateway_partitions_without_leader``: state-topic partitions for which the
    gateway knows no leader right now (their requests are being held). Read from the gateway's
    leadership tables at scrape time; one collector per registry, the worst table reported
    (tests run several gateways in one process)."""

    def __init__(self) -> None:
        self.tables: list[weakref.ref[PartitionLeaders]] = []  # the table is a dataclass: unhashable

    def add(self, table: PartitionLeaders) -> None:
        self.tables = [r for r in self.tables if r() is not None and r() is not table] + [weakref.ref(table)]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "groupcoord_gateway_partitions_without_leader",
            "State-topic partitions the gateway knows no leader for (their requests are held).",
        )
        family.add_metric(
            [],
            max(
                (
                    sum(1 for p in range(t.partitions) if t.address_of(p) is None)
                    for t in (r() for r in self.tables)
                    if t
                ),
                default=0,
            ),
        )
        yield family


_LEADERSHIP: weakref.WeakKeyDictionary[CollectorRegistry, LeadershipCollector] = weakref.WeakKeyDictionary()
_LEADERSHIP_LOCK = threading.Lock()
