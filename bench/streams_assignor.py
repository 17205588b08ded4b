"""streams-assignor: the streams-group task assignor (``core/streams/task_assignor.py``) against
Kafka 4.4's own ``StickyTaskAssignor``, on the same group shapes in the same run.

Each shape is members (one Kafka Streams process each), subtopologies (every second one
stateful) of equal input partitions, and standby replicas. Both assignors get a first
assignment of an empty group and a reassignment after one member left (the others holding
their tasks as current); the figure is the median of ``--rounds`` runs after warm-up runs.
Kafka's side runs ``bench/java/StreamsAssignorBench.java``, compiled here with ``javac``
against Kafka's jars (``scripts/test`` resolves them), in a JVM of its own, so its figures
are a warmed-up JIT's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

NAME = "streams-assignor"
DESCRIPTION = "streams-group task assignor vs Kafka 4.4's StickyTaskAssignor on the same group shapes, one run"

HERE = Path(__file__).resolve().parent
# (members, subtopologies, partitions each, standby replicas): a 3-instance word count, a
# 30-instance application, and larger ones
SHAPES = ((3, 2, 6, 1), (30, 10, 30, 1), (100, 20, 50, 1), (300, 20, 100, 1))


def ours(members: int, subtopologies: int, partitions: int, standbys: int, rounds: int) -> dict[str, float]:
    from groupcoord.coordinator.core.streams.task_assignor import (  # noqa: PLC0415
        StreamsMemberSpec,
        Subtopology,
        TaskGroupSpec,
        assign_tasks,
    )

    subs = {f"s{s}": Subtopology(partitions, stateful=s % 2 == 1) for s in range(subtopologies)}
    fresh = TaskGroupSpec({f"m{m}": StreamsMemberSpec(f"p{m}") for m in range(members)}, subs, standbys)
    first = assign_tasks(fresh)
    after_leave = TaskGroupSpec(
        {
            f"m{m}": StreamsMemberSpec(f"p{m}", active=first[f"m{m}"].active, standby=first[f"m{m}"].standby)
            for m in range(1, members)
        },
        subs,
        standbys,
    )
    second = assign_tasks(after_leave)

    def timed(group: TaskGroupSpec) -> float:
        started = time.perf_counter()
        assign_tasks(group)
        return (time.perf_counter() - started) * 1000

    for _ in range(2):
        timed(fresh)
        timed(after_leave)
    first_ms = [timed(fresh) for _ in range(rounds)]
    leave_ms = [timed(after_leave) for _ in range(rounds)]
    moved = sum(
        1
        for m, tasks in second.items()
        for s, ps in first[m].active.items()
        for p in ps
        if p not in tasks.active.get(s, [])
    )
    return {
        "first_assignment_ms": round(statistics.median(first_ms), 3),
        "after_a_leave_ms": round(statistics.median(leave_ms), 3),
        "max_active_per_member": max(sum(len(ps) for ps in t.active.values()) for t in first.values()),
        "standby_tasks": sum(len(ps) for t in first.values() for ps in t.standby.values()),
        "moved_after_a_leave": moved,
    }


def kafkas(classes: Path, jars: str, shape: tuple[int, int, int, int], rounds: int) -> dict[str, float]:
    out = subprocess.run(
        ["java", "-cp", f"{classes}:{jars}", "StreamsAssignorBench", *map(str, shape), str(rounds)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in json.loads(out.stdout).items()}


def run(args: list[str]) -> dict[str, object]:
    from groupcoord_testing.apache_kafka import VERSIONS, classpath  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--kafka-version", default=VERSIONS["kafka-4.4"])
    opts = parser.parse_args(args)
    jars = classpath(opts.kafka_version)
    load_before = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory(prefix="streams-assignor-") as classes:
        subprocess.run(
            ["javac", "-cp", jars, "-d", classes, str(HERE / "java" / "StreamsAssignorBench.java")],
            check=True,
            capture_output=True,
            timeout=300,
        )
        for shape in SHAPES:
            kafka = kafkas(Path(classes), jars, shape, opts.rounds)
            mine = ours(*shape, opts.rounds)
            results.append(
                {
                    "members": shape[0],
                    "subtopologies": shape[1],
                    "partitions_each": shape[2],
                    "standby_replicas": shape[3],
                    "kafka": kafka,
                    "groupcoord": mine,
                    "first_assignment_ratio": round(mine["first_assignment_ms"] / max(kafka["first_assignment_ms"], 1e-6), 2),
                    "after_a_leave_ratio": round(mine["after_a_leave_ms"] / max(kafka["after_a_leave_ms"], 1e-6), 2),
                }
            )
    return {
        "kafka_version": opts.kafka_version,
        "shapes": results,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
