"""StreamsGroupHeartbeat through the gateway against Kafka 4.4's own coordinator, request for
request: the same requests (Kafka's request checks, a join whose source topic is missing, a join
whose internal topics are missing, an unknown member, a fenced epoch, a changed topology, a
leave, owned tasks the topology does not have) to both, and the answers compared field by field: error codes and messages, epochs and
the statuses with their details. Kafka Streams reads the statuses and logs their details, and a
Kafka user's runbooks quote them.

Left out: a join at a topology epoch below the group's. Kafka Streams 4.4 always sends epoch 0
(topology updates are not supported), and Kafka 4.4 answers a negative one UNKNOWN_SERVER_ERROR
(an exception of its own); the gateway answers it STALE_TOPOLOGY, as Kafka's code means to
(``maybeSetTopologyStaleStatus``), tested in tests/coordinator/core/streams."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.streams_group_heartbeat.v0.request import (
    StreamsGroupHeartbeatRequest,
    Subtopology,
    TaskIds,
    TopicInfo,
    Topology,
)
from kio.static.primitive import i16, i32, i32Timedelta

from groupcoord.common.kafka_wire.exchange import exchange
from groupcoord_testing import BackgroundCluster
from groupcoord_testing.apache_kafka import ApacheKafka

pytestmark = pytest.mark.broker

LOADING = (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available)


def topology(app: str, source: str, *, changelog_partitions: int = 0, regex: tuple[str, ...] = ()) -> Topology:
    return Topology(
        epoch=i32(0),
        subtopologies=(
            Subtopology(
                subtopology_id="0",
                source_topics=(source,) if not regex else (),
                source_topic_regex=regex,
                state_changelog_topics=(
                    TopicInfo(
                        name=f"{app}-store-changelog",
                        partitions=i32(changelog_partitions),
                        replication_factor=i16(0),
                        topic_configs=(),
                    ),
                ),
                repartition_sink_topics=(),
                repartition_source_topics=(),
                copartition_groups=(),
            ),
        ),
    )


def heartbeat(
    group: str,
    member: str,
    epoch: int,
    topo: Topology | None,
    rebalance_ms: int = 30_000,
    owned: bool = False,
    active: tuple[tuple[str, tuple[int, ...]], ...] = (),
) -> Any:
    return StreamsGroupHeartbeatRequest(
        group_id=group,
        member_id=member,
        member_epoch=i32(epoch),
        endpoint_information_epoch=i32(-1),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=rebalance_ms)),
        topology=topo,
        active_tasks=tuple(TaskIds(subtopology_id=s, partitions=tuple(i32(p) for p in ps)) for s, ps in active)
        if epoch == 0 or owned
        else None,
        standby_tasks=() if epoch == 0 or owned else None,
        warmup_tasks=() if epoch == 0 or owned else None,
        process_id="process-1" if epoch == 0 else None,
        user_endpoint=None,
        client_tags=() if epoch == 0 else None,
        task_offsets=None,
        task_end_offsets=None,
    )


def seen(response: Any, app: str) -> tuple[Any, ...]:
    """What the comparison reads of an answer (the side's group id named ``<app>``)."""

    def text(value: str | None) -> str | None:
        return None if value is None else value.replace(app, "<app>")

    statuses = tuple((int(s.status_code), text(s.status_detail)) for s in response.status or ())
    tasks = None if response.active_tasks is None else sorted((t.subtopology_id, list(t.partitions)) for t in response.active_tasks)
    return (response.error_code.name, text(response.error_message), int(response.member_epoch), statuses, tasks)


def test_streams_group_heartbeat_answers_as_kafka_4_4_does(kafka: ApacheKafka, kafka_cluster: BackgroundCluster) -> None:
    run = kafka_cluster.run
    kafkas, ours = (kafka.host, kafka.port), kafka_cluster.gateway.bootstrap_address
    tag = uuid.uuid4().hex[:6]
    source = f"streams-src-{tag}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(source, 2, 1)])[source].result(30)

    def ask(address: tuple[str, int], request: Any) -> Any:
        """The answer, once the coordinator is there: Kafka's first loads its offsets topic
        (NOT_COORDINATOR until then), as a client's FindCoordinator would wait for."""
        deadline = time.monotonic() + 60
        if address == kafkas:
            run(exchange(address, FindCoordinatorRequest(coordinator_keys=(request.group_id,)), "streams-vs-kafka", 15), 20)
        while True:
            response = run(exchange(address, request, "streams-vs-kafka", 15), 20)
            if response.error_code not in LOADING or time.monotonic() > deadline:
                return response
            time.sleep(0.5)

    def both(build: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """``build(app)`` sent to Kafka (group ``kafka-...``) and to the gateway (``gateway-...``)."""
        answers = []
        for side, address in (("kafka", kafkas), ("gateway", ours)):
            app = f"{side}-{tag}"
            answers.append(seen(ask(address, build(app)), app))
        return answers[0], answers[1]

    cases = {
        "an empty member id": lambda app: heartbeat(app, "", 0, topology(app, source)),
        "a join without a topology": lambda app: heartbeat(app, "m", 0, None),
        "a join without a rebalance timeout": lambda app: heartbeat(app, "m", 0, topology(app, source), -1),
        "a changelog with a partition count": lambda app: heartbeat(
            app, "m", 0, topology(app, source, changelog_partitions=3)
        ),
        "a source topic regex": lambda app: heartbeat(app, "m", 0, topology(app, source, regex=("x.*",))),
        "an epoch below -2": lambda app: heartbeat(app, "m", -3, None),
        "a heartbeat to a group that does not exist": lambda app: heartbeat(app, "m", 3, None),
        "a join whose source topic is missing": lambda app: heartbeat(
            f"{app}-nosrc", "m", 0, topology(app, f"missing-{tag}")
        ),
    }
    differing = {}
    for name, build in cases.items():
        theirs, mine = both(build)
        if theirs != mine:
            differing[name] = (theirs, mine)

    # one member through a group's life
    theirs, mine = both(lambda app: heartbeat(app, "m1", 0, topology(app, source)))
    # Kafka's coordinator creates the changelog itself; so does the gateway (as the member)
    if theirs != mine:
        differing["a join whose internal topic is missing"] = (theirs, mine)
    time.sleep(4)  # past the initial rebalance delay (3 s), the internal topic created by now
    theirs, mine = both(lambda app: heartbeat(app, "m1", 1, None, owned=True))
    if theirs != mine:
        differing["the heartbeat after the initial rebalance delay"] = (theirs, mine)
    epoch = theirs[2]
    life: dict[str, Any] = {
        "owned tasks of a subtopology the topology lacks": lambda app: heartbeat(
            app, "m1", epoch, None, owned=True, active=(("9", (0,)),)
        ),
        "an owned task past its subtopology's partitions": lambda app: heartbeat(
            app, "m1", epoch, None, owned=True, active=(("0", (7,)),)
        ),
        "an unknown member": lambda app: heartbeat(app, "nobody", 1, None),
        "an epoch ahead of the member's": lambda app: heartbeat(app, "m1", 7, None),
        "a changed topology at the same epoch": lambda app: heartbeat(app, "m2", 0, topology(app, f"{source}-other")),
        "a leave": lambda app: heartbeat(app, "m1", -1, None),
        "a leave of a member gone": lambda app: heartbeat(app, "m1", -1, None),
    }
    for name, build in life.items():
        theirs, mine = both(build)
        if theirs != mine:
            differing[name] = (theirs, mine)
    assert differing == {}, "\n".join(f"{k}:\n  kafka {t}\n  ours  {m}" for k, (t, m) in differing.items())
