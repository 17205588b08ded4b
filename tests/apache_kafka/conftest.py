"""Fixtures of the Apache Kafka tests: one Kafka 4.4 broker for the module set, groupcoord in
front of it, and Kafka's own Java tools (``kafka-tools``) run against either.

Kafka's tools are run as the shell scripts of a Kafka distribution run them (``java -cp
<jars> <main class>``) on the jars ``scripts/test`` resolves."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from real_parts import start_apache_kafka

from groupcoord.common.partitioning import DEFAULT_STATE_TOPIC
from groupcoord_testing import BackgroundCluster, cluster_options
from groupcoord_testing.apache_kafka import VERSIONS, ApacheKafka, java_command

CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
TRANSACTIONAL_MESSAGE_COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """Apache Kafka 4.4, one node, PLAINTEXT: our upstream and Kafka's own coordinator."""
    k = start_apache_kafka("kafka-4.4", tmp_path_factory.mktemp("kafka-4.4"))
    try:
        yield k
    finally:
        k.stop()


@pytest.fixture(scope="session")
def kafka_cluster(kafka: ApacheKafka) -> Iterator[BackgroundCluster]:
    """groupcoord (control plane, 2 shard processes, gateway) in front of ``kafka``.

    Its tests run the same groups, by the same ids, on Kafka's own coordinator and through the
    gateway side by side, to compare the two: adoption would rightly hold the gateway's members
    back while Kafka's are live (docs/adoption.md), so it is off here; tests/e2e/test_adoption.py
    holds it."""
    options = cluster_options(state_topic=DEFAULT_STATE_TOPIC, adopt_upstream_groups=False)
    with BackgroundCluster((kafka.host, kafka.port), options) as c:
        yield c


def run_tool(main: str, *args: str, timeout: float = 120, version: str = VERSIONS["kafka-4.4"]) -> subprocess.CompletedProcess[str]:
    """One of Kafka's tools run to completion (``check`` left to the caller: errors are outputs)."""
    return subprocess.run(
        java_command(version, main, *args), capture_output=True, text=True, timeout=timeout, check=False
    )


def start_tool(main: str, *args: str, log: Path, version: str = VERSIONS["kafka-4.4"]) -> subprocess.Popen[str]:
    """A long-running tool (VerifiableConsumer...) with stdout piped (its JSON events), stderr to ``log``."""
    return subprocess.Popen(
        java_command(version, main, *args),
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
