"""ShareFetch and ShareAcknowledge at the group's shard, as KIP-932 tells them: a new
share-partition starts where share.auto.offset.reset says, a fetch acquires what the upstream
returned for one member at a time, acknowledgements accept, release (delivered again with one
more delivery) and reject; a lock that runs out gives the record to the next fetch; every change
is one record that replays to the same state, and deleting the group deletes its delivery
state."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the core tests' drivers

from kio.schema.errors import ErrorCode  # noqa: E402
from shard_test_context import ShardContext  # noqa: E402

from groupcoord.coordinator.core.config import GroupConfig  # noqa: E402
from groupcoord.rpc.v1 import group_admin_pb2 as admin_pb  # noqa: E402
from groupcoord.rpc.v1 import share_group_pb2 as pb  # noqa: E402
from tests.coordinator.core.test_assignors import image, tid  # noqa: E402

ORDERS = tid("orders")
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4


def step1(
    ctx: ShardContext,
    member: str,
    acks: list[tuple[int, int, int]] = (),  # type: ignore[assignment]
    fetch: bool = True,
    renew: bool = False,
) -> pb.SharePartitionResponse:
    request = pb.ShareDeliveryRequest(api_version=2 if renew else 1, group_id="g", member_id=member, is_renew_ack=renew)
    part = request.partitions.add(topic_id=ORDERS, partition=0, fetch=fetch)
    for first, last, kind in acks:
        part.acknowledgements.add(first_offset=first, last_offset=last, acknowledge_types=[kind])
    token, _ = ctx.call("share_delivery", request)
    return ctx.answer(token).partitions[0]


def step2(
    ctx: ShardContext,
    member: str,
    fetch_offset: int,
    offsets: range,
    start: int | None = None,
    max_records: int = 500,
) -> list[tuple[int, int, int]]:
    request = pb.ShareDeliveryRequest(
        api_version=1, group_id="g", member_id=member, acquire=True, max_records=max_records
    )
    part = request.partitions.add(
        topic_id=ORDERS, partition=0, fetch_offset=fetch_offset, offsets=list(offsets)
    )
    if start is not None:
        part.start_offset = start
    token, _ = ctx.call("share_delivery", request)
    return [
        (r.first_offset, r.last_offset, r.delivery_count) for r in ctx.answer(token).partitions[0].acquired
    ]


def context() -> ShardContext:
    return ShardContext(GroupConfig(share_group_record_lock_duration_ms=15_000))


def test_members_take_turns_and_acknowledgements_decide_what_comes_again() -> None:
    ctx = context()
    first = step1(ctx, "a")
    assert first.reset_to == "latest", "a new share-partition: the gateway asks the upstream where to start"
    assert step2(ctx, "a", 100, range(100, 110), start=100, max_records=5) == [(100, 104, 1)]
    told = step1(ctx, "b")
    assert (told.HasField("reset_to"), told.fetch_offset) == (False, 105)
    assert step2(ctx, "b", 100, range(100, 110)) == [(105, 109, 1)], "a's records are not b's"

    acked = step1(ctx, "a", [(100, 101, ACCEPT), (102, 102, RELEASE), (103, 104, REJECT)])
    assert acked.acknowledge_error_code == 0 and acked.fetch_offset == 102
    assert step2(ctx, "b", 102, range(102, 112)) == [(102, 102, 2), (110, 111, 1)]
    wrong = step1(ctx, "a", [(105, 105, ACCEPT)], fetch=False)
    assert wrong.acknowledge_error_code == ErrorCode.invalid_record_state.value, "105 is b's"
    ctx.assert_replay_equals_live()


def test_a_lock_that_runs_out_gives_the_record_to_the_next_fetch() -> None:
    ctx = context()
    step1(ctx, "a")
    assert step2(ctx, "a", 0, range(0, 3), start=0) == [(0, 2, 1)]
    ctx.advance(15_000)
    assert step1(ctx, "b").fetch_offset == 0
    assert step2(ctx, "b", 0, range(0, 3)) == [(0, 2, 2)]
    late = step1(ctx, "a", [(0, 2, ACCEPT)], fetch=False)
    assert late.acknowledge_error_code == ErrorCode.invalid_record_state.value, "a's lock ran out"
    ctx.assert_replay_equals_live()


def test_a_renewed_record_stays_the_members_past_its_first_lock() -> None:
    """KIP-1222: RENEW, in a request that says it carries RENEW, locks the record again for a
    whole lock duration; RENEW in any other request is INVALID_REQUEST and changes nothing."""
    ctx = context()
    step1(ctx, "a")
    assert step2(ctx, "a", 0, range(0, 3), start=0) == [(0, 2, 1)]
    ctx.advance(10_000)
    unflagged = step1(ctx, "a", [(0, 0, RENEW)], fetch=False)
    assert unflagged.acknowledge_error_code == ErrorCode.invalid_request.value
    assert step1(ctx, "a", [(0, 1, RENEW)], fetch=False, renew=True).acknowledge_error_code == 0
    ctx.advance(6_000)
    assert step1(ctx, "b").fetch_offset == 2, "2's lock ran out; 0 and 1 were renewed"
    assert step1(ctx, "a", [(0, 1, ACCEPT)], fetch=False).acknowledge_error_code == 0
    ctx.assert_replay_equals_live()


def test_a_group_that_disables_renewal_refuses_renew() -> None:
    ctx = context()
    ctx.set_group_configs("g", share_renew_acknowledge_enable="false")
    step1(ctx, "a")
    assert step2(ctx, "a", 0, range(0, 3), start=0) == [(0, 2, 1)]
    refused = step1(ctx, "a", [(0, 0, RENEW)], fetch=False, renew=True)
    assert refused.acknowledge_error_code == ErrorCode.invalid_record_state.value
    assert step1(ctx, "a", [(0, 2, ACCEPT)], fetch=False, renew=True).acknowledge_error_code == 0


def test_a_revert_restores_the_delivery_state_and_deleting_the_group_deletes_it() -> None:
    ctx = context()
    step1(ctx, "a")
    step2(ctx, "a", 0, range(0, 4), start=0)
    saved = ctx.shard.data.copy()
    step1(ctx, "a", [(0, 3, ACCEPT)], fetch=False)
    assert ctx.shard.data.share_partitions != saved.share_partitions
    ctx.shard.restore(saved)
    assert ctx.shard.data.share_partitions == saved.share_partitions

    ctx2 = context()
    beat = pb.ShareGroupHeartbeatRequest(api_version=1, group_id="g", member_id="a", member_epoch=0)
    beat.subscribed_topic_names.names.append("orders")
    ctx2.call("share_group_heartbeat", beat)
    step1(ctx2, "a")
    step2(ctx2, "a", 0, range(0, 2), start=0)
    ctx2.call(
        "share_group_heartbeat",
        pb.ShareGroupHeartbeatRequest(api_version=1, group_id="g", member_id="a", member_epoch=-1),
    )
    token, _ = ctx2.call("delete_groups", admin_pb.DeleteGroupsRequest(groups_names=["g"]))
    assert ctx2.answer(token).results[0].error_code == 0
    assert ctx2.shard.data.share_partitions == {}
    ctx2.assert_replay_equals_live()


def test_a_member_that_leaves_or_times_out_gives_its_records_back_at_once() -> None:
    ctx = ShardContext(GroupConfig(share_group_record_lock_duration_ms=60_000))  # locks outlive sessions
    for member in ("a", "b"):
        beat = pb.ShareGroupHeartbeatRequest(api_version=1, group_id="g", member_id=member, member_epoch=0)
        beat.subscribed_topic_names.names.append("orders")
        ctx.call("share_group_heartbeat", beat)
    step1(ctx, "a")
    assert step2(ctx, "a", 0, range(0, 3), start=0) == [(0, 2, 1)]
    ctx.call(
        "share_group_heartbeat",
        pb.ShareGroupHeartbeatRequest(api_version=1, group_id="g", member_id="a", member_epoch=-1),
    )
    assert step1(ctx, "b").fetch_offset == 0, "a's records are free before their locks run out"
    assert step2(ctx, "b", 0, range(0, 3)) == [(0, 2, 2)]
    ctx.advance(45_000)  # b never heartbeats again: its session runs out, and its records come back
    assert "b" not in ctx.shard.groups["g"].members
    assert step1(ctx, "c").fetch_offset == 0
    ctx.assert_replay_equals_live()


def test_a_share_session_that_ends_gives_back_what_its_member_holds_at_once() -> None:
    """A consumer closing (its final ShareAcknowledge) or its connection dropping ends its share
    session: after the acknowledgements it sent, what it still holds comes back at once, as a
    RELEASE would (Kafka 4.4 keeps the delivery counts: at the limit a record is archived)."""
    ctx = ShardContext(GroupConfig(share_group_record_lock_duration_ms=60_000, share_group_delivery_count_limit=2))
    step1(ctx, "a")
    assert step2(ctx, "a", 0, range(0, 4), start=0) == [(0, 3, 1)]
    step1(ctx, "a", [(0, 0, RELEASE)], fetch=False)
    assert step2(ctx, "a", 0, range(0, 1)) == [(0, 0, 2)], "0 is at the delivery-count limit now"
    request = pb.ShareDeliveryRequest(api_version=1, group_id="g", member_id="a", end_session=True)
    part = request.partitions.add(topic_id=ORDERS, partition=0)
    part.acknowledgements.add(first_offset=1, last_offset=1, acknowledge_types=[ACCEPT])
    token, _ = ctx.call("share_delivery", request)
    assert ctx.answer(token).partitions[0].acknowledge_error_code == 0
    assert step1(ctx, "b").fetch_offset == 2, "given back before any lock ran out; 0 archived, 1 accepted"
    assert step2(ctx, "b", 2, range(2, 4)) == [(2, 3, 2)]
    ctx.assert_replay_equals_live()


def test_offsets_are_described_altered_only_when_empty_and_deleted() -> None:
    from tests.coordinator.core.test_assignors import image  # noqa: PLC0415

    ctx = context()
    ctx.apply(ctx.shard.on_metadata_update(image(orders=2), 0))
    beat = pb.ShareGroupHeartbeatRequest(api_version=1, group_id="g", member_id="a", member_epoch=0)
    beat.subscribed_topic_names.names.append("orders")
    ctx.call("share_group_heartbeat", beat)
    step1(ctx, "a")
    step2(ctx, "a", 10, range(10, 14), start=10)
    step1(ctx, "a", [(10, 11, ACCEPT)], fetch=False)

    def describe() -> list[tuple[str, int, int, int]]:
        token, _ = ctx.call(
            "describe_share_group_offsets",
            pb.DescribeShareGroupOffsetsRequest(
                groups=[pb.DescribeShareGroupOffsetsGroup(group_id="g", all_topics=True)]
            ),
        )
        return [
            (t.topic_name, p.partition_index, p.start_offset, p.done)
            for t in ctx.answer(token).groups[0].topics
            for p in t.partitions
        ]

    assert describe() == [("orders", 0, 12, 0)]
    alter = pb.AlterShareGroupOffsetsRequest(group_id="g")
    alter.topics.add(topic_name="orders", partitions=[0, 1, 7], start_offsets=[0, 3, 0])
    token, _ = ctx.call("alter_share_group_offsets", alter)
    assert ctx.answer(token).error_code == ErrorCode.non_empty_group.value
    ctx.call(
        "share_group_heartbeat",
        pb.ShareGroupHeartbeatRequest(api_version=1, group_id="g", member_id="a", member_epoch=-1),
    )
    token, _ = ctx.call("alter_share_group_offsets", alter)
    codes = [p.error_code for p in ctx.answer(token).responses[0].partitions]
    assert codes == [0, 0, ErrorCode.unknown_topic_or_partition.value]
    assert describe() == [("orders", 0, 0, 0), ("orders", 1, 3, 0)]
    assert ctx.shard.data.share_partitions[("g", ORDERS, 0)].state_epoch == 1, "a reset is a new state epoch"
    delete = pb.AlterShareGroupOffsetsRequest(group_id="g")
    delete.topics.add(topic_name="orders")
    token, _ = ctx.call("delete_share_group_offsets", delete)
    assert ctx.answer(token).responses[0].error_code == 0 and describe() == []
    ctx.assert_replay_equals_live()


def test_offsets_given_to_a_group_never_used_set_it_up_empty_as_kafka_4_2_does() -> None:
    """KAFKA-19662: ``kafka-share-groups.sh --reset-offsets`` on a share group nobody joined yet
    sets the group up, so its members start where the operator said; a delete still needs
    the group, and a group of another type is not taken over."""
    from tests.coordinator.core.test_assignors import image  # noqa: PLC0415

    ctx = context()
    ctx.apply(ctx.shard.on_metadata_update(image(orders=2), 0))
    delete = pb.AlterShareGroupOffsetsRequest(group_id="g", delete=True)
    delete.topics.add(topic_name="orders")
    token, _ = ctx.call("delete_share_group_offsets", delete)
    assert ctx.answer(token).error_code == ErrorCode.group_id_not_found.value
    # asked for its offsets first (as --from-file does): none, and no error, as Kafka 4.4
    asked = pb.DescribeShareGroupOffsetsRequest()
    asked.groups.add(group_id="g").topics.add(topic_name="orders", partitions=[0, 1])
    token, _ = ctx.call("describe_share_group_offsets", asked)
    [described] = ctx.answer(token).groups
    assert described.error_code == 0
    assert [p.start_offset for p in described.topics[0].partitions] == [-1, -1]
    alter = pb.AlterShareGroupOffsetsRequest(group_id="g")
    alter.topics.add(topic_name="orders", partitions=[0, 1], start_offsets=[3, 5])
    token, _ = ctx.call("alter_share_group_offsets", alter)
    answer = ctx.answer(token)
    assert answer.error_code == 0 and [p.error_code for p in answer.responses[0].partitions] == [0, 0]
    group = ctx.shard.data.groups["g"]
    assert group.is_empty() and group.group_epoch == 0
    assert {k[2]: v.start_offset for k, v in ctx.shard.data.share_partitions.items() if k[0] == "g"} == {0: 3, 1: 5}
    # the first member reads partition 0 from offset 3, not from share.auto.offset.reset
    beat = pb.ShareGroupHeartbeatRequest(api_version=1, group_id="g", member_id="a", member_epoch=0)
    beat.subscribed_topic_names.names.append("orders")
    token, _ = ctx.call("share_group_heartbeat", beat)
    assert ctx.answer(token).error_code == 0
    first = step1(ctx, "a")
    assert (first.error_code, first.fetch_offset, first.HasField("reset_to")) == (0, 3, False)
    ctx.assert_replay_equals_live()


def test_each_answer_counts_what_its_step_did_to_records() -> None:
    """The counts the shard's metrics add up (ShareDeliveryResponse.counts): acquired and
    redelivered, acknowledged by type, locks run out, and archived — rejected, or given back at
    the delivery-count limit (here 2)."""
    ctx = ShardContext(
        GroupConfig(share_group_record_lock_duration_ms=15_000, share_group_delivery_count_limit=2)
    )

    def counts(request: pb.ShareDeliveryRequest) -> dict[str, int]:
        token, _ = ctx.call("share_delivery", request)
        return {f.name: v for f, v in ctx.answer(token).counts.ListFields()}

    def ack(member: str, acks: list[tuple[int, int, int]]) -> pb.ShareDeliveryRequest:
        request = pb.ShareDeliveryRequest(api_version=1, group_id="g", member_id=member)
        part = request.partitions.add(topic_id=ORDERS, partition=0, fetch=True)
        for first, last, kind in acks:
            part.acknowledgements.add(first_offset=first, last_offset=last, acknowledge_types=[kind])
        return request

    def acquire(member: str, fetch_offset: int, offsets: range) -> pb.ShareDeliveryRequest:
        request = pb.ShareDeliveryRequest(api_version=1, group_id="g", member_id=member, acquire=True)
        request.partitions.add(topic_id=ORDERS, partition=0, fetch_offset=fetch_offset, offsets=list(offsets), start_offset=0)
        return request

    assert counts(ack("a", [])) == {}
    assert counts(acquire("a", 0, range(0, 10))) == {"acquired": 10}
    assert sum(ctx.shard.metrics().share_records_in_flight().values()) == 10
    assert counts(ack("a", [(0, 4, ACCEPT), (5, 6, RELEASE), (7, 7, REJECT)])) == {
        "accepted": 5, "released": 2, "rejected": 1, "archived": 1,
    }  # fmt: skip
    assert counts(acquire("b", 5, range(5, 7))) == {"acquired": 2, "redelivered": 2}
    assert sum(ctx.shard.metrics().share_records_in_flight().values()) == 4, "5 and 6 (b's) and 8 and 9 (a's): 0-4 and 7 are done"
    ctx.advance(15_000)  # a's 8 and 9 (first delivery) and b's 5 and 6 (second: the limit) run out
    assert counts(ack("c", [])) == {"lock_timeouts": 4, "archived": 2}
    assert counts(ack("c", [])) == {}, "counted once"
    wrong = counts(ack("a", [(8, 8, ACCEPT)]))
    assert wrong == {}, "an acknowledgement refused counts nothing"


def test_a_rejected_record_and_one_past_its_delivery_limit_go_to_the_dead_letter_queue() -> None:
    """KIP-1191: with errors.deadletterqueue.topic.name set, a record the client rejects and a
    record released once too often are ARCHIVING until their copy is in the DLQ topic, with
    Kafka's headers; a gap goes nowhere. The write happens outside the shard (a Publish); its
    end archives them, and the window moves on."""
    from groupcoord.coordinator.core.contract import PublishOutcome  # noqa: PLC0415
    from groupcoord.coordinator.core.share.delivery import dead_letter_key  # noqa: PLC0415
    from groupcoord.coordinator.core.share.share_partition import RecordState  # noqa: PLC0415

    ctx = ShardContext(
        GroupConfig(share_group_record_lock_duration_ms=15_000, share_group_delivery_count_limit=2)
    )
    ctx.apply(ctx.shard.on_metadata_update(image(orders=1), 0))
    ctx.set_group_configs(
        "g", errors_deadletterqueue_topic_name="dlq.orders", errors_deadletterqueue_copy_record_enable="true"
    )
    key = ("g", ORDERS, 0)
    step1(ctx, "a")
    assert step2(ctx, "a", 0, range(0, 3), start=0) == [(0, 2, 1)]
    step1(ctx, "a", [(0, 0, REJECT), (1, 1, RELEASE)], fetch=False)
    published, _ = ctx.timer.publications[dead_letter_key(key)]
    assert published.topic == "dlq.orders" and published.partition_of == 0
    assert published.deduplicate_since_ms is None, "written here: nothing of it can be in the DLQ yet"
    assert published.rule.required_prefix == "dlq." and published.rule.required_config == (
        "errors.deadletterqueue.group.enable",
        "true",
    )
    [rejected] = published.records
    assert dict(rejected.headers) == {
        "__dlq.errors.topic": b"orders",
        "__dlq.errors.partition": b"0",
        "__dlq.errors.offset": b"0",
        "__dlq.errors.group": b"g",
        "__dlq.errors.delivery.count": b"1",
        "__dlq.errors.message": b"Offset rejected by client.",
    }
    assert rejected.copy_of == ("orders", 0, 0), "copy.record: the source record's key and value"
    # offset 1 comes again, is released a second time (its limit): on its way too, once the
    # write in flight ended (one at a time per share-partition)
    assert step2(ctx, "b", 1, range(1, 3)) == [(1, 1, 2)]
    step1(ctx, "b", [(1, 1, RELEASE)], fetch=False)
    assert list(ctx.timer.publications) == [dead_letter_key(key)]
    state = ctx.shard.data.share_partitions[key]
    assert [state.deliveries[o].state for o in (0, 1)] == [RecordState.ARCHIVING] * 2
    assert state.start_offset == 0, "the window waits for the DLQ"
    ctx.assert_replay_equals_live()

    ctx.timer.publication_ended(dead_letter_key(key), PublishOutcome(written=1, requests=1))
    ctx.advance(0)
    [limit] = ctx.timer.publications[dead_letter_key(key)][0].records
    assert dict(limit.headers)["__dlq.errors.offset"] == b"1"
    assert dict(limit.headers)["__dlq.errors.delivery.count"] == b"2"
    assert dict(limit.headers)["__dlq.errors.message"] == b"Offset delivery count exceeded the threshold."
    assert ctx.shard.data.share_partitions[key].start_offset == 1, "0 is done: archived, behind the start"
    ctx.timer.publication_ended(dead_letter_key(key), PublishOutcome(written=0, failed_requests=1, error="down"))
    ctx.advance(0)
    assert ctx.shard.data.share_partitions[key].start_offset == 2, "archived, written or not: Kafka's rule"
    assert ctx.timer.publications == {}
    ctx.assert_replay_equals_live()


def test_a_new_leader_resumes_the_dead_letters_its_predecessor_left() -> None:
    """The state says what is ARCHIVING: a shard loaded from the log publishes it again once
    the runtime's first topics image came (a loaded shard has none yet, and a dead letter's
    headers name its source topic: by id they would be other dead letters than those its
    predecessor wrote, CI wrote them twice so), and asks the write to skip the copies written
    since the earliest of them began."""
    from groupcoord.coordinator.core.share.delivery import dead_letter_key  # noqa: PLC0415
    from groupcoord.coordinator.core.share.share_partition import RecordState  # noqa: PLC0415

    ctx = context()
    ctx.set_group_configs("g", errors_deadletterqueue_topic_name="dlq.orders")
    step1(ctx, "a")
    step2(ctx, "a", 0, range(0, 2), start=0)
    ctx.clock.now_ms = 7_000
    step1(ctx, "a", [(0, 1, REJECT)], fetch=False)
    assert ctx.timer.publications == {}, "this one had no image either: they wait in ARCHIVING"
    successor = ShardContext(ctx.config)
    for record in ctx.log.records():
        successor.shard.replay(record)
    successor.apply(successor.shard.on_loaded(9_000))
    assert successor.timer.publications == {}, "no topics image yet: the source topic has no name"
    state = successor.shard.data.share_partitions[("g", ORDERS, 0)]
    assert [state.deliveries[o].state for o in (0, 1)] == [RecordState.ARCHIVING] * 2
    successor.apply(successor.shard.on_metadata_update(image(orders=1), 9_200))
    published, _ = successor.timer.publications[dead_letter_key(("g", ORDERS, 0))]
    assert [dict(r.headers)["__dlq.errors.offset"] for r in published.records] == [b"0", b"1"]
    assert {dict(r.headers)["__dlq.errors.topic"] for r in published.records} == {b"orders"}
    assert all(r.copy_of is None for r in published.records), "copy.record is off by default"
    assert published.deduplicate_since_ms == 7_000


def test_a_dead_letter_topic_name_may_not_start_with_two_underscores() -> None:
    ctx = context()
    request = admin_pb.AlterGroupConfigsRequest(api_version=1, group_id="g")
    request.configs.add(
        name="errors.deadletterqueue.topic.name", value="__consumer_offsets", config_operation=0
    )
    answer = ctx.answer(ctx.call("alter_group_configs", request)[0])
    assert answer.error_code == ErrorCode.invalid_config.value
    assert answer.error_message == "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"
