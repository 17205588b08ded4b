"""The metrics facade the gateway calls."""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry

from groupcoord.observability.families import ApiLabel, families_of


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
