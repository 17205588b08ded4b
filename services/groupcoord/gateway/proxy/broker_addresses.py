"""Rewrite broker addresses in responses so clients only ever see gateway listeners.

Pure functions over kio response objects: Metadata (brokers), FindCoordinator (the single
coordinator of v0-3 and the ``coordinators`` list of v4+), DescribeCluster (brokers) and Produce
v10+ (KIP-951's ``node_endpoints``: the new leaders of partitions answered
NOT_LEADER_OR_FOLLOWER). The caller supplies ``gateway_address(node_id, host, port) -> (host,
port)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from groupcoord.common.kafka_wire.api_keys import ApiKey

REWRITTEN_APIS = frozenset({ApiKey.METADATA, ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_CLUSTER, ApiKey.PRODUCE})
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
    if api_key == ApiKey.PRODUCE:
        return [(int(e.node_id), e.host, int(e.port)) for e in getattr(body, "node_endpoints", ())]
    return []


NOT_LEADER_OR_FOLLOWER = b"\x00\x06"
"""The error code (int16) beside which a Produce answer names endpoints: an answer without
these two bytes anywhere has none, and is relayed as it came."""


def names_endpoints(api_key: int, api_version: int, payload: bytes) -> bool:
    """Whether an upstream answer may name brokers: always for the APIs that list them; for a
    Produce answer only from v10 and with a NOT_LEADER_OR_FOLLOWER in it (a byte search, so
    that the data path's answers are not decoded)."""
    if api_key != ApiKey.PRODUCE:
        return True
    return api_version >= 10 and NOT_LEADER_OR_FOLLOWER in payload


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
    if api_key == ApiKey.PRODUCE and getattr(body, "node_endpoints", ()):
        return dataclasses.replace(
            body, node_endpoints=tuple(_moved(e, int(e.node_id), to) for e in body.node_endpoints)
        )
    return body
