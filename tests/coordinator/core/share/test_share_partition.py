"""A share-partition's delivery state, read like KIP-932's walk-through: records acquired
under locks, acknowledged one by one, redelivered when released or when their lock runs out,
archived after the delivery-count limit; the start offset moving over what is done. Then the
invariants, over any sequence of fetches, acknowledgements and clock ticks by several members
(hypothesis): no record held by two members, nothing done ever delivered again, no delivery
beyond the limit, the window bounded, and the snapshot record replaying to the same state."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.share.share_partition import (
    AcknowledgeType,
    AcquiredRange,
    DeliveryLimits,
    RecordState,
    SharePartition,
    acknowledge,
    acquire,
    dead_letters,
    expire_locks,
    finish_dead_letters,
    from_record_value,
    release_member,
    to_record_value,
)

LIMITS = DeliveryLimits(delivery_count_limit=3, lock_duration_ms=30_000, max_in_flight=10)
ACCEPT, RELEASE, REJECT, GAP, RENEW = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.GAP,
    AcknowledgeType.RENEW,
)


def fetch(sp: SharePartition, member: str, log: range, max_records: int = 500, now: int = 0):
    """What the gateway does for a ShareFetch: fetch from the share-partition's next offset
    (the log holds ``log``'s offsets) and acquire what came back."""
    start = max(sp.next_fetch_offset(), log.start)
    return acquire(sp, member, start, [o for o in log if o >= start], max_records, now, LIMITS)


def test_two_members_never_get_the_same_records() -> None:
    sp = SharePartition.starting_at(0)
    sp, a = fetch(sp, "a", range(0, 8), max_records=5)
    sp, b = fetch(sp, "b", range(0, 8), max_records=5)
    assert a == [AcquiredRange(0, 4, 1)]
    assert b == [AcquiredRange(5, 7, 1)]
    assert sp.start_offset == 0 and sp.end_offset == 8 and sp.in_flight() == 8


def test_accepted_records_move_the_start_offset_and_are_forgotten() -> None:
    sp, _ = fetch(SharePartition.starting_at(0), "a", range(0, 4))
    sp, error = acknowledge(sp, "a", [(0, 1, [ACCEPT]), (3, 3, [ACCEPT])], 1_000, LIMITS)
    assert error is ErrorCode.none
    assert sp.start_offset == 2, "offset 2 is still acquired, offset 3 waits behind it"
    assert sorted(sp.deliveries) == [2, 3]
    sp, error = acknowledge(sp, "a", [(2, 2, [ACCEPT])], 1_000, LIMITS)
    assert (sp.start_offset, sp.end_offset, sp.deliveries) == (4, 4, {})


def test_a_released_record_goes_to_the_next_fetch_first_with_its_delivery_count() -> None:
    sp, _ = fetch(SharePartition.starting_at(0), "a", range(0, 3))
    sp, error = acknowledge(sp, "a", [(0, 2, [ACCEPT, RELEASE, ACCEPT])], 1_000, LIMITS)
    assert error is ErrorCode.none and sp.next_fetch_offset() == 1
    sp, acquired = fetch(sp, "b", range(0, 5))
    assert acquired == [AcquiredRange(1, 1, 2), AcquiredRange(3, 4, 1)]


def test_a_record_delivered_as_often_as_the_limit_allows_is_archived() -> None:
    sp = SharePartition.starting_at(0)
    for delivery in range(1, LIMITS.delivery_count_limit + 1):
        sp, acquired = fetch(sp, "a", range(0, 1))
        assert acquired == [AcquiredRange(0, 0, delivery)]
        sp, _ = acknowledge(sp, "a", [(0, 0, [RELEASE])], 0, LIMITS)
    assert sp.start_offset == 1, "archived after the third delivery, so the start offset moved"
    sp, acquired = fetch(sp, "a", range(0, 1))
    assert acquired == []


def test_a_lock_that_runs_out_makes_the_record_available_again() -> None:
    sp, _ = fetch(SharePartition.starting_at(0), "a", range(0, 2), now=0)
    assert sp.next_lock_deadline() == 30_000
    assert expire_locks(sp, 29_999, LIMITS) is sp
    sp = expire_locks(sp, 30_000, LIMITS)
    assert {o: d.state for o, d in sp.deliveries.items()} == {
        0: RecordState.AVAILABLE,
        1: RecordState.AVAILABLE,
    }
    sp, error = acknowledge(sp, "a", [(0, 0, [ACCEPT])], 30_000, LIMITS)
    assert error is ErrorCode.invalid_record_state, "too late: the record is no longer a's"


def test_renew_keeps_the_lock_for_another_lock_duration() -> None:
    sp, _ = fetch(SharePartition.starting_at(0), "a", range(0, 1), now=0)
    sp, error = acknowledge(sp, "a", [(0, 0, [RENEW])], 20_000, LIMITS)
    assert error is ErrorCode.none and sp.next_lock_deadline() == 50_000
    assert expire_locks(sp, 40_000, LIMITS) is sp


def test_acknowledging_what_another_member_holds_changes_nothing() -> None:
    sp, _ = fetch(SharePartition.starting_at(0), "a", range(0, 2))
    sp, _ = fetch(sp, "b", range(0, 3))
    # b's offset; beyond a's into b's; overlapping batches (0 acknowledged by the first already),
    # as Kafka 4.4 answers them
    for batches in ([(2, 2, [ACCEPT])], [(0, 2, [ACCEPT])], [(0, 0, [ACCEPT]), (0, 1, [ACCEPT])]):
        after, error = acknowledge(sp, "a", batches, 0, LIMITS)
        assert error is ErrorCode.invalid_record_state and after is sp
    # backwards, too many types, an unknown type; offsets never acquired, or done and forgotten
    done, _ = acknowledge(sp, "a", [(0, 1, [ACCEPT])], 0, LIMITS)
    for batches in ([(1, 0, [ACCEPT])], [(0, 1, [ACCEPT, ACCEPT, ACCEPT])], [(0, 0, [9])], [(5, 5, [ACCEPT])]):
        after, error = acknowledge(sp, "a", batches, 0, LIMITS)
        assert error is ErrorCode.invalid_request and after is sp
    after, error = acknowledge(done, "a", [(0, 1, [ACCEPT])], 0, LIMITS)
    assert error is ErrorCode.invalid_request and after is done and done.start_offset == 2


def test_reject_and_gap_archive() -> None:
    sp, _ = fetch(SharePartition.starting_at(0), "a", range(0, 2))
    sp, error = acknowledge(sp, "a", [(0, 1, [REJECT, GAP])], 0, LIMITS)
    assert error is ErrorCode.none and sp.start_offset == 2 and not sp.deliveries


def test_offsets_the_log_does_not_hold_are_gaps_never_delivered() -> None:
    """Compaction or transaction markers leave holes: the fetch from 0 returns 0, 3, 4."""
    sp, acquired = acquire(SharePartition.starting_at(0), "a", 0, [0, 3, 4], 500, 0, LIMITS)
    assert acquired == [AcquiredRange(0, 0, 1), AcquiredRange(3, 4, 1)]
    assert sp.deliveries[1].state is sp.deliveries[2].state is RecordState.ARCHIVED
    sp, _ = acknowledge(sp, "a", [(0, 0, [ACCEPT])], 0, LIMITS)
    assert sp.start_offset == 3


def test_a_record_compacted_away_while_held_stays_with_its_holder() -> None:
    """Offsets 0-2 delivered, 0 given back; the log then loses offsets 0 and 1 to compaction.
    The refetch from 0 shows 0 holds no record (a gap now), but 1 stays a's until a says."""
    sp, _ = fetch(SharePartition.starting_at(0), "a", range(0, 3))
    sp, _ = acknowledge(sp, "a", [(0, 0, [RELEASE])], 0, LIMITS)
    sp, acquired = acquire(sp, "b", 0, [2, 3], 500, 0, LIMITS)
    assert acquired == [AcquiredRange(3, 3, 1)]
    assert sp.start_offset == 1 and sp.deliveries[1].member_id == "a"
    sp, error = acknowledge(sp, "a", [(1, 2, [ACCEPT])], 0, LIMITS)
    assert error is ErrorCode.none and sp.start_offset == 3


def test_the_window_never_holds_more_than_max_in_flight_offsets() -> None:
    sp, acquired = fetch(SharePartition.starting_at(100), "a", range(100, 200))
    assert acquired == [AcquiredRange(100, 109, 1)]
    sp, acquired = fetch(sp, "b", range(100, 200))
    assert acquired == [], "full until something is acknowledged"
    sp, _ = acknowledge(sp, "a", [(100, 102, [ACCEPT])], 0, LIMITS)
    sp, acquired = fetch(sp, "b", range(100, 200))
    assert acquired == [AcquiredRange(110, 112, 1)]


def test_a_member_leaving_gives_its_records_back() -> None:
    sp, _ = fetch(SharePartition.starting_at(0), "a", range(0, 2))
    sp, _ = fetch(sp, "b", range(0, 4))
    sp = release_member(sp, "a", LIMITS, 0)
    assert [o for o, d in sorted(sp.deliveries.items()) if d.state is RecordState.AVAILABLE] == [0, 1]
    assert sp.next_fetch_offset() == 0


def test_the_snapshot_record_holds_the_whole_state() -> None:
    sp, _ = acquire(SharePartition.starting_at(5, state_epoch=2), "a", 5, [5, 6, 7, 9], 500, 7, LIMITS)
    sp, _ = acknowledge(sp, "a", [(6, 6, [ACCEPT])], 8, LIMITS)
    value = to_record_value(sp)
    assert [(r.first_offset, r.last_offset, r.state) for r in value.runs] == [
        (5, 5, 1), (6, 6, 2), (7, 7, 1), (8, 8, 4), (9, 9, 1)
    ]  # fmt: skip
    assert from_record_value(type(value).FromString(value.SerializeToString())) == sp


# -- invariants --------------------------------------------------------------------------------

MEMBERS = ("a", "b")
operation = st.one_of(
    st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 6), st.integers(0, 3)),
    st.tuples(
        st.just("ack"),
        st.sampled_from(MEMBERS),
        st.integers(0, 40),
        st.integers(0, 4),
        st.lists(st.sampled_from([ACCEPT, RELEASE, REJECT, GAP, RENEW]), min_size=1, max_size=5),
    ),
    st.tuples(st.just("tick"), st.integers(0, 20_000)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("compact"), st.integers(0, 40)),  # the log loses a record (compaction)
    st.tuples(st.just("dead letters written")),  # the DLQ write of what is ARCHIVING ended
)
PROPERTY_LIMITS = DeliveryLimits(delivery_count_limit=2, lock_duration_ms=30_000, max_in_flight=10)


@settings(max_examples=1000, deadline=None)
@given(st.lists(operation, max_size=60), st.sets(st.integers(0, 40), max_size=10), st.booleans())
def test_no_record_is_held_twice_nothing_done_comes_back_and_replay_is_the_state(ops, holes, dlq) -> None:
    """With a dead-letter queue (``dlq``) too: a record ARCHIVING is never delivered again and
    only its DLQ write's end makes it ARCHIVED."""
    limits = replace(PROPERTY_LIMITS, dead_letters=dlq)
    archiving: set[int] = set()
    sp, now = SharePartition.starting_at(0), 0
    done: set[int] = set()  # offsets acknowledged, archived or never holding a record
    deliveries: dict[int, int] = {}
    for op in ops:
        log = [o for o in range(0, 41) if o not in holes]
        held_before = {
            o: d.member_id
            for o, d in sp.deliveries.items()
            if d.state is RecordState.ACQUIRED and d.lock_deadline_ms > now
        }
        if op[0] == "fetch":
            _, member, max_records, markers = op
            before = sp
            start = sp.next_fetch_offset()
            fetched = [o for o in log if o >= start]
            covered_to = None
            if markers and len(fetched) > markers:
                # the fetch ends on records never to deliver (transaction markers, an aborted
                # transaction's): it covers them, returns only the ones before
                covered_to = fetched[-1]
                holes = holes | set(fetched[-markers:])
                fetched = fetched[:-markers]
            sp, acquired = acquire(sp, member, start, fetched, max_records, now, limits, covered_to)
            # a fetch takes nothing from anyone: what was held is held by the same member
            assert all(sp.deliveries[o].member_id == m for o, m in held_before.items()), "lock stolen"
            offsets = [o for r in acquired for o in range(r.first_offset, r.last_offset + 1)]
            assert len(offsets) <= max_records
            for offset in offsets:
                held = before.deliveries.get(offset)
                assert held is None or held.state is RecordState.AVAILABLE, "acquired while held or done"
                assert offset not in done and offset not in holes
                deliveries[offset] = deliveries.get(offset, 0) + 1
                assert deliveries[offset] <= limits.delivery_count_limit
                assert sp.deliveries[offset].delivery_count == deliveries[offset]
        elif op[0] == "ack":
            _, member, pick, length, types = op
            # mostly what the member holds (as clients do), sometimes anything
            held = sorted(
                o
                for o, d in sp.deliveries.items()
                if d.member_id == member and d.state is RecordState.ACQUIRED
            )
            first = held[pick % len(held)] if held and pick % 5 else pick
            last = first + length
            kinds = types[:1] if len(types) != length + 1 else types
            before = sp
            sp, error = acknowledge(sp, member, [(first, last, kinds)], now, limits)
            if error is ErrorCode.none:  # only what the member held, each offset it named
                assert all(held_before.get(o) == member for o in range(first, last + 1)), "not its record"
            else:
                assert sp == expire_locks(before, now, limits)
        elif op[0] == "tick":
            now += op[1]
            sp = expire_locks(sp, now, limits)
        elif op[0] == "leave":
            sp = release_member(sp, op[1], limits, now)
        elif op[0] == "dead letters written":
            sp = finish_dead_letters(sp, [o for r in dead_letters(sp) for o in range(r.first_offset, r.last_offset + 1)])
        else:
            holes = holes | {op[1]}
        for offset in archiving:  # on its way to the DLQ until that write ends, then done
            state = sp.deliveries[offset].state if offset in sp.deliveries else RecordState.ARCHIVED
            assert state in (RecordState.ARCHIVING, RecordState.ARCHIVED), "left ARCHIVING but for the DLQ"
            assert state is RecordState.ARCHIVING or op[0] == "dead letters written" or offset in done
        archiving = {o for o, d in sp.deliveries.items() if d.state is RecordState.ARCHIVING}
        assert dlq or not archiving, "no DLQ, no ARCHIVING"
        done |= {
            o for o, d in sp.deliveries.items() if d.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        }
        done |= set(range(0, sp.start_offset))
        # the window: every offset from the start to the end, no more than max_in_flight of them
        assert sorted(sp.deliveries) == list(range(sp.start_offset, sp.end_offset))
        assert sp.end_offset - sp.start_offset <= limits.max_in_flight
        assert sp.start_offset == sp.end_offset or sp.deliveries[sp.start_offset].state not in (
            RecordState.ACKNOWLEDGED,
            RecordState.ARCHIVED,
        )
        for offset in done & set(sp.deliveries):
            assert sp.deliveries[offset].state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED), "undone"
        assert from_record_value(to_record_value(sp)) == sp


def test_a_fetch_ending_on_transaction_markers_moves_past_them() -> None:
    # offsets 2-3 are a commit marker and an aborted record: covered, never delivered
    sp, acquired = acquire(SharePartition.starting_at(0), "a", 0, [0, 1], 500, 0, LIMITS, covered_to=3)
    assert [(r.first_offset, r.last_offset) for r in acquired] == [(0, 1)]
    assert (sp.end_offset, sp.next_fetch_offset()) == (4, 4), "the next fetch starts after the markers"
    sp, _ = acknowledge(sp, "a", [(0, 1, [ACCEPT])], 0, LIMITS)
    assert (sp.start_offset, sp.end_offset) == (4, 4), "done and gaps alike are behind the start"
    # only markers: nothing to deliver, and still past them
    sp, acquired = acquire(sp, "a", 4, [], 500, 0, LIMITS, covered_to=6)
    assert acquired == [] and sp.next_fetch_offset() == 7
    # a fetch cut short by max_records leaves what it did not reach alone
    sp, acquired = acquire(SharePartition.starting_at(0), "a", 0, [0, 1, 2], 2, 0, LIMITS, covered_to=5)
    assert sp.end_offset == 2 and sp.next_fetch_offset() == 2
