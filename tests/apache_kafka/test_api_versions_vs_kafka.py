"""ApiVersions through the gateway against Kafka 4.4's own, for every API that names groups
(issue 42: "a test holds the two lists equal, or names each difference with its reason").

A client decides what it sends from ApiVersions: a version Kafka 4.4 serves and we do not makes
a Kafka 4.4 client fall back (or be refused), one we serve and Kafka does not is a promise to
keep. So the group and share APIs the gateway advertises are Kafka 4.4's ranges exactly, but for
the differences named below; a difference that is gone fails the test too, so the list stays
true. The gateway's ranges do not depend on the upstream (tests/e2e/test_api_versions.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from groupcoord.common.group_api_declarations import DECLARATIONS, NOT_SERVED
from groupcoord.common.kafka_wire.api_keys import ApiKey
from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

pytestmark = pytest.mark.broker

GROUP_APIS = frozenset(api.key for api in DECLARATIONS) | NOT_SERVED

DIFFERENCES: dict[ApiKey, tuple[tuple[int, int] | None, str]] = {
    ApiKey.STREAMS_GROUP_HEARTBEAT: ((0, 0), "v1 (Kafka 4.4's) is not in kio yet; clients pick v0"),
    ApiKey.STREAMS_GROUP_DESCRIBE: ((0, 0), "v1 (include_topology_description) is not in kio yet"),
}
"""Group APIs whose range through the gateway is not Kafka 4.4's: ours, and why."""

FEATURES_NOT_FINALIZED = {
    "group.version": "Kafka's controller level for its own coordinator; the APIs above say what we serve",
}
"""Features Kafka 4.4 finalizes that the gateway does not, and why. It finalizes three:
``transaction.version``, at the upstream's level (2 here, which TxnOffsetCommit v5 serves),
``share.version`` 2 of its own (KIP-1191's dead-letter queues are served) and
``streams.version`` 1 of its own (streams groups are served)."""


def api_versions(cluster: BackgroundCluster, address: tuple[str, int]) -> Any:
    request = ApiVersionsRequest(client_software_name="groupcoord-tests", client_software_version="1")
    return cluster.run(exchange(address, request, "api-versions", 10), 15)


def ranges(response: Any) -> dict[int, tuple[int, int]]:
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


def test_the_gateway_advertises_kafka_4_4s_group_api_versions_but_for_named_differences(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    theirs = ranges(api_versions(kafka_cluster, (kafka.host, kafka.port)))
    ours = ranges(api_versions(kafka_cluster, kafka_cluster.gateway.bootstrap_address))
    differing = {
        ApiKey(key): (theirs.get(key), ours.get(key)) for key in GROUP_APIS if theirs.get(key) != ours.get(key)
    }
    print({k.name: v for k, v in differing.items()})
    assert set(differing) == set(DIFFERENCES), "a group API differs from Kafka 4.4 without a reason, or no more"
    for key, (served, why) in DIFFERENCES.items():
        assert ours.get(key) == served, f"{key.name}: {why}"


def test_the_gateway_finalizes_kafka_4_4s_transaction_version_and_its_own_share_version(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    theirs = api_versions(kafka_cluster, (kafka.host, kafka.port))
    ours = api_versions(kafka_cluster, kafka_cluster.gateway.bootstrap_address)
    finalized = {f.name: int(f.max_version_level) for f in theirs.finalized_features or ()}
    assert set(FEATURES_NOT_FINALIZED) <= set(finalized), f"Kafka 4.4 finalizes {finalized}"
    assert finalized["transaction.version"] == 2
    assert {f.name: int(f.max_version_level) for f in ours.finalized_features} == {
        "transaction.version": 2,
        "share.version": 2,
        "streams.version": 1,
    }
    assert finalized["share.version"] == 2, "Kafka 4.4's too: its dead-letter queues"
    assert finalized["streams.version"] == 1, "Kafka 4.4's too"
    # the epoch of the upstream's features when the gateway asked (at its start)
    assert 0 <= int(ours.finalized_features_epoch) <= int(theirs.finalized_features_epoch)
    # Supported ranges as Kafka names them (KIP-1022: not those starting at level 0, before v4)
    supported = {f.name: (int(f.min_version), int(f.max_version)) for f in ours.supported_features}
    kafkas = {f.name: (int(f.min_version), int(f.max_version)) for f in theirs.supported_features}
    assert supported == {k: v for k, v in kafkas.items() if k in ("transaction.version", "share.version", "streams.version")}
