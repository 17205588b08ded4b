"""DescribeConfigs / IncrementalAlterConfigs for GROUP resources (type 32) on the wire: group
resources go to our coordinator, the others (here a TOPIC) to the upstream cluster, and the
answers come back in request order."""

from __future__ import annotations

import socket
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.static.primitive import i8

from groupcoord.common.kafka_wire import codec
from groupcoord.common.kafka_wire.framing import ClientConnection, frame_bytes
from groupcoord_testing import BackgroundCluster

pytestmark = pytest.mark.broker
GROUP, TOPIC, CLIENT_METRICS = 32, 2, 16


def call(bootstrap: str, body, correlation_id: int = 7):  # noqa: ANN001, ANN201
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(frame_bytes(codec.encode_request(correlation_id, "test", body)))
        conn, got = ClientConnection(), []
        while not got:
            got = conn.receive_data(s.recv(1 << 16))
    cid, response = codec.decode_response(int(body.__api_key__), int(body.__version__), got[0][1])
    assert cid == correlation_id
    return response


RETRIABLE = {
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
}


def call_retrying(bootstrap: str, body, attempts: int = 50):  # noqa: ANN001, ANN201
    """Like a Kafka client: retry while the coordinator is loading or moving (a fresh cluster's
    partitions may still be loading when the first request arrives)."""
    for _ in range(attempts):
        response = call(bootstrap, body)
        if not any(r.error_code in RETRIABLE for r in response.responses):
            return response
        time.sleep(0.2)
    return response


def test_group_configs_are_ours_and_topic_configs_the_upstreams(cluster: BackgroundCluster) -> None:
    group, topic = f"cfg-{uuid.uuid4().hex[:6]}", f"cfg-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(15)

    # when a member sets the group's session timeout, then describing shows it, beside a topic's configs
    altered = call_retrying(
        cluster.bootstrap,
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=i8(GROUP),
                    resource_name=group,
                    configs=(
                        AlterableConfig(
                            name="consumer.session.timeout.ms", config_operation=i8(0), value="50000"
                        ),
                    ),
                ),
            ),
            validate_only=False,
        ),
    )
    assert [(r.resource_name, r.error_code) for r in altered.responses] == [(group, ErrorCode.none)]

    described = call(
        cluster.bootstrap,
        DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=i8(TOPIC), resource_name=topic, configuration_keys=None
                ),
                DescribeConfigsResource(
                    resource_type=i8(GROUP), resource_name=group, configuration_keys=None
                ),
            ),
        ),
    )
    assert [(int(r.resource_type), r.resource_name) for r in described.results] == [
        (TOPIC, topic),
        (GROUP, group),
    ]
    group_configs = {c.name: c.value for c in described.results[1].configs}
    assert group_configs["consumer.session.timeout.ms"] == "50000"
    assert described.results[1].error_code == ErrorCode.none

    # an out-of-range value is refused with INVALID_CONFIG and changes nothing
    refused = call(
        cluster.bootstrap,
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=i8(GROUP),
                    resource_name=group,
                    configs=(
                        AlterableConfig(
                            name="consumer.session.timeout.ms", config_operation=i8(0), value="1"
                        ),
                    ),
                ),
            ),
            validate_only=False,
        ),
    )
    assert refused.responses[0].error_code == ErrorCode.invalid_config

    # librdkafka's AdminClient sends GROUP as Kafka's ConfigResource.Type.GROUP (32): it reaches
    # our coordinator (the upstream, tansu, keeps no group configs at all)
    from confluent_kafka.admin import ConfigResource, ResourceType  # noqa: PLC0415

    resource = ConfigResource(ResourceType.GROUP, group)
    seen = admin.describe_configs([resource])[resource].result(15)
    assert seen["consumer.session.timeout.ms"].value == "50000"

    # CLIENT_METRICS (16) is not a group resource: the upstream's, never answered as a group
    metrics = call(
        cluster.bootstrap,
        DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=i8(CLIENT_METRICS), resource_name=group, configuration_keys=None
                ),
            ),
        ),
    )
    assert "consumer.session.timeout.ms" not in {c.name for c in metrics.results[0].configs}
