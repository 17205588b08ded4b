"""The replay filter: which records count, decided from the log alone (see fencing.py)."""

from groupcoord.common.records import LEADER_EPOCH_TYPE_ID
from groupcoord.coordinator.runtime.fencing import Fence, ReplayFilter, parse_marker


def replay(log: list[tuple[str, Fence]]) -> list[int]:
    """Indices of the data records a replayer applies; ('m', f) is a marker, ('d', f) data."""
    filt = ReplayFilter()
    applied = []
    for i, (kind, fence) in enumerate(log):
        if kind == "m":
            filt.see_marker(fence)
        elif filt.admits(fence.tag()):
            applied.append(i)
    return applied


A1 = Fence(1, 111)
B2 = Fence(2, 222)
A3 = Fence(3, 333)


def test_zombie_records_after_a_newer_marker_are_skipped() -> None:
    log = [("m", A1), ("d", A1), ("m", B2), ("d", A1), ("d", B2)]
    assert replay(log) == [1, 4]


def test_a_late_marker_of_an_older_epoch_fences_nobody() -> None:
    log = [("m", B2), ("d", B2), ("m", A1), ("d", A1), ("d", B2)]
    assert replay(log) == [1, 4]


def test_same_epoch_reload_fences_the_previous_incarnation() -> None:
    again = Fence(1, 999)
    log = [("m", A1), ("d", A1), ("m", again), ("d", A1), ("d", again)]
    assert replay(log) == [1, 4]


def test_compacted_log_replays_like_the_full_log() -> None:
    # Markers are keyed by epoch: compaction can drop A1's marker only for a later epoch-1
    # marker, never for B2's. Dropping the leading marker must not drop A1's valid data.
    full = [("m", A1), ("d", A1), ("m", B2), ("d", B2), ("m", A3), ("d", A3)]
    compacted_same_epoch = [("d", A1), ("m", Fence(1, 5)), ("m", B2), ("d", B2)]
    assert replay(full) == [1, 3, 5]
    assert replay(compacted_same_epoch) == [0, 3]


def test_supersedes_and_marker_round_trip() -> None:
    filt = ReplayFilter()
    key, value = B2.marker("shard-1")
    assert key[:2] == LEADER_EPOCH_TYPE_ID.to_bytes(2, "big") and parse_marker(value) == B2
    filt.see_marker(parse_marker(value))
    assert filt.supersedes(A1) and filt.supersedes(Fence(2, 1)) and not filt.supersedes(B2)
    assert not filt.supersedes(A3)
