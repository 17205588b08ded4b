"""The consumer scenarios' checks fail when they should: VerifiableConsumer's own JSON lines, as
the tool prints them, fed to the bookkeeping of ``verifiable.py`` (no JVM needed)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .verifiable import COOPERATIVE_STICKY, RANGE, VerifiableConsumerGroup

TOPIC = "t"


def group(tmp_path: Path, strategy: str = COOPERATIVE_STICKY) -> VerifiableConsumerGroup:
    return VerifiableConsumerGroup("127.0.0.1:1", TOPIC, "g", tmp_path, size=2, assignment_strategy=strategy)


def feed(g: VerifiableConsumerGroup, idx: int, *events: dict[str, Any]) -> None:
    """The lines one consumer process printed, read as its reader thread reads its stdout."""
    lines = "".join(json.dumps(e) + "\n" for e in events)
    g._read(g.nodes[idx], SimpleNamespace(stdout=io.StringIO(lines)))  # type: ignore[arg-type]


def assigned(ts: int, *partitions: int) -> dict[str, Any]:
    return {
        "timestamp": ts,
        "name": "partitions_assigned",
        "partitions": [{"topic": TOPIC, "partition": p} for p in partitions],
    }


def revoked(ts: int, *partitions: int) -> dict[str, Any]:
    return {
        "timestamp": ts,
        "name": "partitions_revoked",
        "partitions": [{"topic": TOPIC, "partition": p} for p in partitions],
    }


def consumed(ts: int, partition: int, low: int, high: int) -> dict[str, Any]:
    batch = {
        "topic": TOPIC,
        "partition": partition,
        "count": high - low + 1,
        "minOffset": low,
        "maxOffset": high,
    }
    return {"timestamp": ts, "name": "records_consumed", "count": high - low + 1, "partitions": [batch]}


def committed(ts: int, partition: int, offset: int, success: bool = True) -> dict[str, Any]:
    offsets = [{"topic": TOPIC, "partition": partition, "offset": offset}]
    return {
        "timestamp": ts,
        "name": "offsets_committed",
        "offsets": offsets,
        "success": success,
        "error": None,
    }


def test_a_partition_assigned_while_another_consumer_owns_it(tmp_path: Path) -> None:
    g = group(tmp_path)
    feed(g, 0, assigned(1000, 0, 1))
    feed(g, 1, assigned(1005, 1))
    assert g.double_ownership() == [f"('{TOPIC}', 1) assigned to consumer 1 at 1005 while owned by 0"]


def test_a_partition_revoked_and_assigned_in_one_millisecond_is_one_owner(tmp_path: Path) -> None:
    g = group(tmp_path)
    feed(g, 1, assigned(1005, 1))  # read first, though it happened last
    feed(g, 0, assigned(1000, 0, 1), revoked(1005, 1))
    assert g.double_ownership() == []


def test_a_commit_going_back(tmp_path: Path) -> None:
    g = group(tmp_path)
    feed(g, 0, assigned(1000, 0), consumed(1001, 0, 0, 9), committed(1002, 0, 10), revoked(1003, 0))
    feed(g, 1, assigned(1004, 0), consumed(1005, 0, 3, 4), committed(1006, 0, 5))
    assert g.committed_going_back() == [f"('{TOPIC}', 0) committed 5 by consumer 1 after 10"]
    assert g.errors == [
        f"consumer 1 (incremental): consumed ('{TOPIC}', 0) from 3, behind the group's committed offset 10"
    ]
    assert g.unexplained_duplicates() == {(TOPIC, 0): [3, 4]}


def test_redelivery_within_the_window_of_a_refused_commit(tmp_path: Path) -> None:
    g = group(tmp_path)
    feed(g, 0, assigned(1000, 0), consumed(1001, 0, 0, 4), committed(1002, 0, 5))
    feed(g, 0, consumed(1003, 0, 5, 9), committed(1004, 0, 10, success=False), revoked(1005, 0))
    feed(g, 1, assigned(1006, 0), consumed(1007, 0, 5, 12), committed(1008, 0, 13))
    assert g.windows() == {(TOPIC, 0): [range(5, 10)]}
    assert g.duplicates() == {(TOPIC, 0): 5}
    assert g.unexplained_duplicates() == {}
    assert g.errors == []


def test_eager_consumption_outside_the_assignment(tmp_path: Path) -> None:
    g = group(tmp_path, RANGE)
    feed(g, 0, assigned(1000, 0), revoked(1001, 0), assigned(1002, 1), consumed(1003, 0, 0, 0))
    assert g.errors == [
        f"consumer 0 (eager): consumed ('{TOPIC}', 0) which is not assigned ([('{TOPIC}', 1)])",
    ]
