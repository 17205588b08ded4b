"""ShareGroupHeartbeat, read like KIP-932's case study: members join a share group, are given
partitions at once (no revocation to wait for), share a partition when they outnumber them,
leave or time out; the epochs move as Kafka's do. Then a property: over any sequence of
heartbeats, leaves and expiries, the records replay to the live state — also from a compacted
log (the latest record per key) — and once every member has heartbeated, every subscribed
partition is read and every member is told exactly its target."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.contract import CancelTimer, CoordinatorResult, ScheduleTimer
from groupcoord.coordinator.core.share.share_group import ShareGroup, ShareGroupState, replay
from groupcoord.coordinator.core.share.share_heartbeat import (
    ShareGroupConfig,
    ShareHeartbeat,
    heartbeat,
    session_expired,
    session_timer_key,
)
from tests.coordinator.core.test_assignors import image, tid

CONFIG = ShareGroupConfig(session_timeout_ms=45_000, heartbeat_interval_ms=5_000, max_size=3)
IMAGE = image(orders=2, payments=3)
ORDERS, PAYMENTS = tid("orders"), tid("payments")


class Partition:
    """One state partition's share groups, changed only by replaying what handlers return."""

    def __init__(self) -> None:
        self.groups: dict[str, ShareGroup] = {}
        self.log: list[Any] = []

    def apply(self, result: CoordinatorResult) -> Any:
        for record in result.records:
            replay(self.groups, record.key, record.value)
            self.log.append(record)
        return result.response

    def expire(self, group_id: str, member_id: str, deadline_ms: int) -> CoordinatorResult:
        return session_expired(self.groups.get(group_id), member_id)

    def beat(self, member: str, epoch: int, topics: list[str] | None = None, group: str = "g", img=IMAGE):
        request = ShareHeartbeat(group, member, epoch, subscribed_topic_names=topics, client_id=member)
        result = heartbeat(self.groups.get(group), request, 0, CONFIG, img, self.expire)
        response = self.apply(result)
        if response.error_code is ErrorCode.none and epoch != -1:  # what it says is what was written
            written = self.groups[group].members[member]
            assert response.member_epoch == written.member_epoch
            if response.assignment is not None:
                assert {t: frozenset(ps) for t, ps in response.assignment.items()} == dict(written.assigned)
        return response, result


def test_members_join_and_are_given_partitions_at_once() -> None:
    p = Partition()
    a, result = p.beat("a", 0, ["orders", "payments"])
    assert a.error_code is ErrorCode.none and a.member_epoch == 1 and a.heartbeat_interval_ms == 5_000
    assert a.assignment == {ORDERS: [0, 1], PAYMENTS: [0, 1, 2]}
    (timer,) = result.timers
    assert isinstance(timer, ScheduleTimer) and timer.key == session_timer_key("g", "a") and timer.delay_ms == 45_000
    b, _ = p.beat("b", 0, ["orders", "payments"])
    assert b.member_epoch == 2 and b.assignment == {ORDERS: [1], PAYMENTS: [2]}
    # a learns the new epoch and gives up what b now reads: no revocation round
    a, _ = p.beat("a", 1)
    assert a.member_epoch == 2 and a.assignment == {ORDERS: [0], PAYMENTS: [0, 1]}
    steady, _ = p.beat("a", 2)
    assert steady.member_epoch == 2 and steady.assignment is None, "nothing changed: nothing told"
    assert p.groups["g"].state() is ShareGroupState.STABLE


def test_more_members_than_partitions_share_them() -> None:
    p = Partition()
    for m in "abc":
        p.beat(m, 0, ["orders"])
    answers = {m: p.beat(m, p.groups["g"].members[m].member_epoch)[0] for m in "abc"}
    readers: dict[int, set[str]] = {}
    for m, answer in answers.items():
        (partition,) = (answer.assignment or {ORDERS: p.groups["g"].members[m].assigned[ORDERS]})[ORDERS]
        readers.setdefault(partition, set()).add(m)
    assert sorted(len(r) for r in readers.values()) == [1, 2], "both partitions read, nobody idle"


def test_a_member_leaving_or_timing_out_goes_and_the_epoch_moves() -> None:
    p = Partition()
    p.beat("a", 0, ["orders"])
    p.beat("b", 0, ["orders"])
    left, result = p.beat("b", -1)
    assert left.member_epoch == -1 and left.error_code is ErrorCode.none
    assert result.timers == [CancelTimer(session_timer_key("g", "b"))]
    assert set(p.groups["g"].members) == {"a"} and p.groups["g"].group_epoch == 3
    p.apply(p.expire("g", "a", 45_000))
    assert p.groups["g"].state() is ShareGroupState.EMPTY and p.groups["g"].group_epoch == 4
    assert p.expire("g", "a", 90_000).records == [], "gone already: nothing to write"


def test_epochs_unknown_members_and_bad_requests_get_kafkas_errors() -> None:
    p = Partition()
    assert p.beat("a", 5, ["orders"])[0].error_code is ErrorCode.group_id_not_found
    p.beat("a", 0, ["orders"])
    p.beat("b", 0, ["orders"])
    a, _ = p.beat("a", 1)  # a moves to epoch 2; the answer is lost, a sends 1 again
    again, _ = p.beat("a", 1)
    assert again.error_code is ErrorCode.none and again.member_epoch == 2 and again.assignment is not None
    assert p.beat("a", 7)[0].error_code is ErrorCode.fenced_member_epoch
    assert p.beat("z", 3)[0].error_code is ErrorCode.unknown_member_id
    assert p.beat("z", -1)[0].error_code is ErrorCode.unknown_member_id
    for request in (
        ShareHeartbeat("", "a", 0, subscribed_topic_names=["orders"]),
        ShareHeartbeat("g", " ", 0, subscribed_topic_names=["orders"]),
        ShareHeartbeat("g", "c", 0),
        ShareHeartbeat("g", "a", -2),
    ):
        answer = heartbeat(p.groups["g"], request, 0, CONFIG, IMAGE, p.expire).response
        assert answer.error_code is ErrorCode.invalid_request, request


def test_a_full_group_refuses_a_new_member() -> None:
    p = Partition()
    for m in "abc":
        p.beat(m, 0, ["orders"])
    refused, result = p.beat("d", 0, ["orders"])
    assert refused.error_code is ErrorCode.group_max_size_reached and result.records == []


def test_a_subscription_change_moves_the_epoch_and_the_assignment() -> None:
    p = Partition()
    p.beat("a", 0, ["orders"])
    changed, _ = p.beat("a", 1, ["payments"])
    assert changed.member_epoch == 2 and changed.assignment == {PAYMENTS: [0, 1, 2]}


def test_new_partitions_of_a_subscribed_topic_move_the_epoch() -> None:
    p = Partition()
    p.beat("a", 0, ["orders"])
    grown, _ = p.beat("a", 1, img=image(orders=4, payments=3))
    assert grown.member_epoch == 2 and grown.assignment == {ORDERS: [0, 1, 2, 3]}
    unrelated, _ = p.beat("a", 2, img=image(orders=4, payments=9))
    assert unrelated.member_epoch == 2 and unrelated.assignment is None, "not a topic it reads"


# -- property ----------------------------------------------------------------------------------

step = st.one_of(
    st.tuples(st.just("join"), st.sampled_from("abcd"), st.sets(st.sampled_from(["orders", "payments"]), min_size=1)),
    st.tuples(st.just("beat"), st.sampled_from("abcd"), st.none()),
    st.tuples(st.just("leave"), st.sampled_from("abcd"), st.none()),
    st.tuples(st.just("expire"), st.sampled_from("abcd"), st.none()),
)


def compacted(log: list[Any]) -> dict[str, ShareGroup]:
    latest: dict[tuple[str, bytes], Any] = {}
    for record in log:
        latest.pop((type(record.key).__name__, record.key.SerializeToString()), None)
        latest[(type(record.key).__name__, record.key.SerializeToString())] = record
    groups: dict[str, ShareGroup] = {}
    for record in latest.values():
        if record.value is not None:
            replay(groups, record.key, record.value)
    return groups


@settings(max_examples=150, deadline=None)
@given(st.lists(step, max_size=30))
def test_records_replay_to_the_live_state_and_everyone_is_told_the_target(steps) -> None:
    p = Partition()
    for kind, member, topics in steps:
        group = p.groups.get("g")
        known = group.members.get(member) if group is not None else None
        if kind == "join":
            p.beat(member, 0, sorted(topics))
        elif kind == "beat" and known is not None:
            p.beat(member, known.member_epoch)
        elif kind == "leave" and known is not None:
            p.beat(member, -1)
        elif kind == "expire":
            p.apply(p.expire("g", member, 0))
        replayed: dict[str, ShareGroup] = {}
        for record in p.log:
            replay(replayed, record.key, record.value)
        assert replayed == p.groups
        live = {g: x for g, x in p.groups.items()}
        assert compacted(p.log) == live, "a compacted log holds the same state"
    group = p.groups.get("g")
    if group is None or not group.members:
        return
    for member in sorted(group.members):  # everyone heartbeats once, then once more
        p.beat(member, group.members[member].member_epoch)
    told = {}
    for member in sorted(group.members):
        answer, _ = p.beat(member, group.members[member].member_epoch)
        assert answer.error_code is ErrorCode.none
        told[member] = group.members[member].assigned
        assert group.members[member].member_epoch == group.assignment_epoch == group.group_epoch
        assert told[member] == group.target.get(member, {})
    for topic, count in (("orders", 2), ("payments", 3)):
        if any(topic in m.subscribed_topic_names for m in group.members.values()):
            read = {p_ for a in told.values() for p_ in a.get(tid(topic), ())}
            assert read == set(range(count)), f"every partition of {topic} is read"
