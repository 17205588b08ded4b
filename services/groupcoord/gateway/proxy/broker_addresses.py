"""Rewrite broker addresses in responses so clients only ever see gateway listeners.

Pure functions over kio response objects: Metadata (brokers), FindCoordinator (the single
coordinator of v0-3 and the ``coordinators`` list of v4+) and DescribeCluster (brokers). The
caller supplies ``gateway_address(node_id, host, port) -> (host, port)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from groupcoord.common.kafka_wire.api_keys import ApiKey

REWRITTEN_APIS = frozenset({ApiKey.METADATA, ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_CLUSTER})
#: the responses listing every live broker of the cluster (not just one coordinator)
CLUSTER_APIS = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER})

AddressMap = Callable[[int, str, int], tuple[str, int]]


def upstream_brokers(api_key: int, body: Any) -> list[tuple[int, str, int]]:
    """(node id, host, port) of every broker a response names."""
    if api_key == ApiKey.METADATA:
        return [(int(b.node_id), b.host, int(b.port)) for b in body.brokers]
    if api_key == ApiKey.DESCRIBE_CLUSTER:
        return [(int(b.broker_id), b.host, int(b.port)) for b in body.brokers]
    if api_key == ApiKey.FIND_COORDINATOR:
        if hasattr(body, "coordinators"):
            return [(int(c.node_id), c.host, int(c.port)) for c in body.coordinators if int(c.node_id) >= 0]
        return [(int(body.node_id), body.host, int(body.port))] if int(body.node_id) >= 0 else []
    return []


def _moved(item: Any, node_id: int, to: AddressMap) -> Any:
    if node_id < 0:
        return item
    host, port = to(node_id, item.host, int(item.port))
    return dataclasses.replace(item, host=host, port=type(item.port)(port))


def rewrite(api_key: int, body: Any, to: AddressMap) -> Any:
    """``body`` with every broker address replaced by its gateway address."""
    if api_key == ApiKey.METADATA:
        return dataclasses.replace(body, brokers=tuple(_moved(b, int(b.node_id), to) for b in body.brokers))
    if api_key == ApiKey.DESCRIBE_CLUSTER:
        return dataclasses.replace(body, brokers=tuple(_moved(b, int(b.broker_id), to) for b in body.brokers))
    if api_key == ApiKey.FIND_COORDINATOR:
        if hasattr(body, "coordinators"):
            return dataclasses.replace(
                body, coordinators=tuple(_moved(c, int(c.node_id), to) for c in body.coordinators)
            )
        return _moved(body, int(body.node_id), to)
    return body
