"""The group APIs the gateway advertises are its own, whatever the upstream: the same ranges in
front of tansu, Kafka 3.9 (which has no share groups and KIP-848 only at v0) and Kafka 4.4,
each the range its declaration gives (``common/group_api_declarations.py``); and of the
features, ``transaction.version`` at the level the upstream finalized (Kafka 4.4: 2, whose
TxnOffsetCommit v5 the gateway serves; Kafka 3.9 and tansu: not 2), ``share.version`` 2 and
``streams.version`` 1 on every upstream (share groups with dead-letter queues, and streams
groups, are ours). tests/apache_kafka/
test_api_versions_vs_kafka.py holds these ranges against Kafka 4.4's own."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from groupcoord.common.group_api_declarations import DECLARATIONS, NOT_SERVED
from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord_testing import BackgroundCluster

pytestmark = [pytest.mark.broker, pytest.mark.upstreams("tansu", "kafka-4.4", "kafka-3.9")]


def finalized(response: Any) -> dict[str, int]:
    return {f.name: int(f.max_version_level) for f in response.finalized_features or ()}


def test_the_group_apis_advertised_are_the_declared_ones_on_every_upstream(
    broker: Any, cluster: BackgroundCluster
) -> None:
    request = ApiVersionsRequest(client_software_name="groupcoord-tests", client_software_version="1")
    response = cluster.run(exchange(cluster.gateway.bootstrap_address, request, "api-versions", 10), 15)
    advertised = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
    assert {api.key: advertised.get(api.key) for api in DECLARATIONS} == {api.key: api.versions for api in DECLARATIONS}
    assert not NOT_SERVED & set(advertised)
    upstream = cluster.run(exchange((broker.host, broker.port), request, "api-versions", 10), 15)
    theirs = finalized(upstream).get("transaction.version")
    ours = {"share.version": 2, "streams.version": 1}  # share (with DLQs) and streams groups, on every upstream
    assert finalized(response) == ours | ({} if theirs is None else {"transaction.version": min(theirs, 2)})
    if getattr(broker, "upstream_name", "tansu") == "kafka-4.4":
        assert finalized(response) == ours | {"transaction.version": 2}
    else:
        assert finalized(response).get("transaction.version", 0) < 2
