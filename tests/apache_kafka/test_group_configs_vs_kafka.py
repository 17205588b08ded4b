"""Group configs side by side: the same DescribeConfigs and IncrementalAlterConfigs requests
(GROUP resources, type 32) to Kafka 4.4 and to groupcoord in front of it, and the same answers.

Every value below is one a platform team may try with ``kafka-configs.sh --entity-type groups``
or an AdminClient: valid ones, ones out of the broker's range, ones ConfigDef refuses before
that (not a number, below its minimum, not one of the choices), for the consumer and the share
group configs groupcoord serves. The answers (error code and Kafka's message) must be equal,
and a described config must have Kafka's value, type and source.

Left out by design: ``consumer.assignment.interval.ms``'s default (Kafka 4.4 batches
assignments every second, groupcoord assigns at once unless a group asks otherwise: 0), and the
configs groupcoord does not serve (``share.assignment.interval.ms``: it assigns at once; the ``streams.*`` configs of what it
does not serve), which it does not list.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.static.primitive import i8

from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

GROUP = 32  # Kafka's ConfigResource.Type.GROUP
TRIES = {
    "consumer.session.timeout.ms": ["44999", "50000", "60001", "abc"],
    "consumer.heartbeat.interval.ms": ["4999", "6000", "15001"],
    "consumer.assignment.interval.ms": ["-1", "0"],
    "share.session.timeout.ms": ["44999", "45000", "60001", "abc"],
    "share.heartbeat.interval.ms": ["4999", "6000", "15001"],
    "share.record.lock.duration.ms": ["14999", "15000", "60000", "60001"],
    "share.delivery.count.limit": ["1", "2", "10", "11"],
    "share.partition.max.record.locks": ["1", "99", "100", "4000", "4001"],
    "share.auto.offset.reset": ["earliest", "latest", "by_duration:PT1H", "by_duration:-PT1H", "bogus"],
    "share.isolation.level": ["read_committed", "READ_COMMITTED", "bogus"],
    "share.renew.acknowledge.enable": ["false", "TRUE", "maybe"],
    "errors.deadletterqueue.topic.name": ["dlq.orders", "", "__consumer_offsets", "_one"],
    "errors.deadletterqueue.copy.record.enable": ["true", "FALSE", "maybe"],
    "streams.session.timeout.ms": ["44999", "45000", "60001", "abc"],
    "streams.heartbeat.interval.ms": ["4999", "6000", "15001"],
    "streams.num.standby.replicas": ["-1", "0", "2", "3"],
    "streams.initial.rebalance.delay.ms": ["-1", "0", "3000"],
    "no.such.config": ["1"],
}


def answers(cluster: BackgroundCluster, address: tuple[str, int]) -> dict[str, Any]:
    group = f"cfg-{uuid.uuid4().hex[:6]}"

    def ask(body: Any) -> Any:
        return cluster.run(exchange(address, body, "group-configs", 15))

    def alter(name: str, value: str, validate_only: bool) -> tuple[str, str | None]:
        [answer] = ask(
            IncrementalAlterConfigsRequest(
                resources=(
                    AlterConfigsResource(
                        resource_type=i8(GROUP),
                        resource_name=group,
                        configs=(AlterableConfig(name=name, config_operation=i8(0), value=value),),
                    ),
                ),
                validate_only=validate_only,
            )
        ).responses
        return answer.error_code.name, answer.error_message

    def describe() -> dict[str, tuple[str | None, int, int]]:
        [result] = ask(
            DescribeConfigsRequest(
                resources=(
                    DescribeConfigsResource(
                        resource_type=i8(GROUP), resource_name=group, configuration_keys=None
                    ),
                ),
                include_synonyms=False,
                include_documentation=False,
            )
        ).results
        assert result.error_code.value == 0, result
        return {c.name: (c.value, int(c.config_type), int(c.config_source)) for c in result.configs}

    out: dict[str, Any] = {
        "validate only": {f"{n}={v}": alter(n, v, True) for n, vs in TRIES.items() for v in vs}
    }
    out["defaults"] = describe()
    for name, value in (
        ("share.session.timeout.ms", "50000"),
        ("share.record.lock.duration.ms", "20000"),
        ("share.auto.offset.reset", "earliest"),
        ("share.renew.acknowledge.enable", "false"),
        ("consumer.heartbeat.interval.ms", "6000"),
        ("errors.deadletterqueue.topic.name", "dlq.orders"),
        ("errors.deadletterqueue.copy.record.enable", "true"),
    ):
        out[f"set {name}"] = alter(name, value, False)
    out["overrides"] = describe()
    return out


def test_group_configs_are_answered_as_kafka_answers(
    kafka: ApacheKafka, kafka_cluster: BackgroundCluster
) -> None:
    theirs = answers(kafka_cluster, (kafka.host, kafka.port))
    ours = answers(kafka_cluster, kafka_cluster.gateway.bootstrap_address)
    for described in ("defaults", "overrides"):
        served = set(ours[described])
        assert served <= set(theirs[described]), served - set(theirs[described])
        assert served >= {n for n in TRIES if n != "no.such.config"}
        theirs[described] = {n: v for n, v in theirs[described].items() if n in served}
        theirs[described].pop("consumer.assignment.interval.ms")  # see the module docstring
        ours[described].pop("consumer.assignment.interval.ms")
    assert ours["validate only"] == theirs["validate only"]
    assert ours == theirs
