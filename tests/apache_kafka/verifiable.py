"""Kafka's ``VerifiableConsumer`` and ``VerifiableProducer`` driven from a test, as Kafka's own
system tests drive them (``tests/kafkatest/services/verifiable_consumer.py``): each tool prints
one JSON event a line on stdout, a reader thread per process folds them into what the test
checks, and a process is stopped clean (SIGTERM: the tool closes its consumer, leaving the group)
or hard (SIGKILL: a crashed machine, the group finds out by the session timeout).

The per-process bookkeeping is kafkatest's ``ConsumerEventHandler`` and its incremental and
consumer-protocol variants; its checks (records consumed only from assigned partitions and from
the position reached, never behind the group's committed offset; commits not ahead of the
position) are recorded in :attr:`VerifiableConsumerGroup.errors` instead of being raised in the
reader thread, where nobody would see them. Beside them the whole run's events, timestamped by the
JVMs (the same clock as ours), are kept in one timeline so that checks across processes —
a partition owned by two consumers at once, a committed offset going backwards — are made on the
order in which things happened rather than the order the reader threads happened to see them.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .conftest import VERIFIABLE_CONSUMER, VERIFIABLE_PRODUCER, start_tool

RANGE = "org.apache.kafka.clients.consumer.RangeAssignor"
COOPERATIVE_STICKY = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"

TopicPartition = tuple[str, int]


def wait_until(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    """ducktape's ``wait_until``: poll ``condition`` until true, else fail saying ``what``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class ConsumerState(enum.Enum):
    STARTED = "started"
    DEAD = "dead"
    REBALANCING = "rebalancing"
    JOINED = "joined"


class Mode(enum.Enum):
    """How a consumer's rebalance callbacks read, as kafkatest picks its event handler."""

    EAGER = "eager"  # classic protocol, eager assignor: every rebalance revokes everything
    INCREMENTAL = "incremental"  # classic protocol, cooperative assignor: revocations name partitions
    CONSUMER = "consumer"  # KIP-848: incremental, and consuming goes on during a rebalance


@dataclass(frozen=True, slots=True)
class Event:
    """One JSON line of one consumer process (or our own ``killed`` mark after a SIGKILL)."""

    node: int
    timestamp_ms: int
    name: str
    body: dict[str, Any]

    def partitions(self) -> list[TopicPartition]:
        return [(p["topic"], p["partition"]) for p in self.body.get("partitions", [])]


@dataclass
class ConsumerNode:
    """One consumer slot of the group: its current process and kafkatest's handler state, which
    survives restarts as kafkatest's does (counts and committed offsets carry over)."""

    idx: int
    mode: Mode
    log: Path
    group_instance_id: str | None = None
    group_protocol: str = "classic"
    process: subprocess.Popen[str] | None = None
    reader: threading.Thread | None = None
    state: ConsumerState = ConsumerState.DEAD
    revoked_count: int = 0
    assigned_count: int = 0
    assignment: list[TopicPartition] = field(default_factory=list)
    position: dict[TopicPartition, int] = field(default_factory=dict)
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    total_consumed: int = 0


class VerifiableConsumerGroup:
    """``size`` VerifiableConsumer processes (Kafka 4.4's tool) in group ``group_id`` reading
    ``topic`` from ``bootstrap``: kafkatest's ``VerifiableConsumer`` service, the nodes being
    local processes. Commits are synchronous after every poll (the tool's default) unless
    ``enable_autocommit``."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group_id: str,
        workdir: Path,
        *,
        size: int = 3,
        group_protocol: str = "classic",
        assignment_strategy: str = RANGE,
        static_membership: bool = False,
        session_timeout_ms: int = 10_000,
        enable_autocommit: bool = False,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group_id = group_id
        self.workdir = workdir
        self.session_timeout_ms = session_timeout_ms
        self.assignment_strategy = assignment_strategy
        self.enable_autocommit = enable_autocommit
        self.lock = threading.Lock()
        self.nodes = [
            ConsumerNode(
                idx,
                mode=self._mode(group_protocol, assignment_strategy),
                log=workdir / f"{group_id}-consumer-{idx}.log",
                group_instance_id=f"{group_id}-instance-{idx}" if static_membership else None,
                group_protocol=group_protocol,
            )
            for idx in range(size)
        ]
        self.timeline: list[Event] = []
        self.errors: list[str] = []
        self.global_position: dict[TopicPartition, int] = {}
        self.global_committed: dict[TopicPartition, int] = {}
        #: how many times each offset was handed to the application, over the whole run
        self.consumed: dict[TopicPartition, Counter[int]] = defaultdict(Counter)
        #: offsets a consumer had consumed but the group had not committed when it let them go
        self.redelivery_windows: dict[TopicPartition, list[range]] = defaultdict(list)

    @staticmethod
    def _mode(group_protocol: str, assignment_strategy: str) -> Mode:
        if group_protocol.lower() == "consumer":
            return Mode.CONSUMER
        return Mode.INCREMENTAL if assignment_strategy == COOPERATIVE_STICKY else Mode.EAGER

    # -- processes -----------------------------------------------------------------------------

    def command(self, node: ConsumerNode) -> list[str]:
        args = [
            "--bootstrap-server", self.bootstrap,
            "--topic", self.topic,
            "--group-id", self.group_id,
            "--reset-policy", "earliest",
        ]  # fmt: skip
        if node.group_protocol.lower() == "consumer":
            args += ["--group-protocol", "consumer"]
        else:
            args += ["--assignment-strategy", self.assignment_strategy]
            args += ["--session-timeout", str(self.session_timeout_ms)]
        if node.group_instance_id is not None:
            args += ["--group-instance-id", node.group_instance_id]
        if self.enable_autocommit:
            args.append("--enable-autocommit")
        return args

    def set_group_protocol(self, idx: int, group_protocol: str) -> None:
        """What the node's next start runs (the migration tests' upgrade and downgrade)."""
        node = self.nodes[idx]
        node.group_protocol = group_protocol
        node.mode = self._mode(group_protocol, self.assignment_strategy)

    def start(self) -> None:
        for idx in range(len(self.nodes)):
            self.start_node(idx)

    def start_node(self, idx: int) -> None:
        node = self.nodes[idx]
        assert node.process is None or node.process.poll() is not None, f"consumer {idx} is running"
        with node.log.open("a") as log:
            log.write(f"--- start {' '.join(self.command(node))}\n")
        process = start_tool(VERIFIABLE_CONSUMER, *self.command(node), log=node.log)
        node.process = process
        node.reader = threading.Thread(
            target=self._read, args=(node, process), name=f"verifiable-consumer-{idx}", daemon=True
        )
        node.reader.start()

    def stop_node(self, idx: int, clean_shutdown: bool = True, timeout: float = 30) -> None:
        """SIGTERM (the tool closes its consumer) or SIGKILL, and wait for the process to end
        (kafkatest's ``stop_node``)."""
        node = self.nodes[idx]
        process = node.process
        assert process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM if clean_shutdown else signal.SIGKILL)
        process.wait(timeout)
        assert node.reader is not None
        node.reader.join(timeout)
        if not clean_shutdown:
            with self.lock:
                self.timeline.append(Event(idx, int(time.time() * 1000), "killed", {}))
                self._handle_shutdown_complete(node)

    def stop_all(self, clean_shutdown: bool = True) -> None:
        for idx, node in enumerate(self.nodes):
            if node.process is not None and node.process.poll() is None:
                self.stop_node(idx, clean_shutdown)

    def close(self) -> None:
        """Kill whatever is left (a failed test) without touching the bookkeeping."""
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGKILL)
                node.process.wait(10)

    def _read(self, node: ConsumerNode, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            try:
                data = json.loads(line)
            except ValueError:
                continue  # kafkatest ignores what is not JSON
            if not isinstance(data, dict) or "name" not in data:
                continue
            event = Event(node.idx, int(data.get("timestamp", time.time() * 1000)), data["name"], data)
            with self.lock:
                self.timeline.append(event)
                self._handle(node, event)

    # -- kafkatest's event handlers (called under the lock) ------------------------------------

    def _error(self, node: ConsumerNode, message: str) -> None:
        self.errors.append(f"consumer {node.idx} ({node.mode.value}): {message}")

    def _handle(self, node: ConsumerNode, event: Event) -> None:
        match event.name:
            case "startup_complete":
                node.state = ConsumerState.STARTED
            case "shutdown_complete":
                self._handle_shutdown_complete(node)
            case "partitions_assigned":
                node.assigned_count += 1
                node.state = ConsumerState.JOINED
                if node.mode is Mode.EAGER:
                    node.assignment = event.partitions()
                else:
                    node.assignment.extend(event.partitions())
            case "partitions_revoked":
                self._handle_partitions_revoked(node, event)
            case "records_consumed":
                self._handle_records_consumed(node, event)
            case "offsets_committed":
                self._handle_offsets_committed(node, event)

    def _give_up(self, node: ConsumerNode, partitions: list[TopicPartition]) -> None:
        """A consumer lets ``partitions`` go (revoked, closed, killed). What it consumed of one
        past the group's committed offset is an at-least-once window: the next owner starts at
        the committed offset and consumes it again. With a commit after every poll that is what
        a SIGKILL cut short, or what a commit refused during a rebalance left uncommitted."""
        for tp in partitions:
            committed = self.global_committed.get(tp, 0)
            if node.position.get(tp, committed) > committed:
                self.redelivery_windows[tp].append(range(committed, node.position[tp]))

    def _handle_shutdown_complete(self, node: ConsumerNode) -> None:
        self._give_up(node, list(node.position))
        node.state = ConsumerState.DEAD
        node.assignment = []
        node.position = {}

    def _handle_partitions_revoked(self, node: ConsumerNode, event: Event) -> None:
        node.revoked_count += 1
        if node.mode is Mode.EAGER:
            self._give_up(node, list(node.position))
            node.position = {}
            node.state = ConsumerState.REBALANCING
            node.assignment = []
            return
        # An incremental revocation gives up only its partitions: the consumer keeps consuming
        # the others from where it is, and what it consumes of them past the group's commit is
        # still a window when it lets them go later (forgetting every position here lost the
        # window of a commit refused in the next rebalance: a record consumed twice inside an
        # at-least-once window was reported as unexplained).
        self._give_up(node, event.partitions())
        for tp in event.partitions():
            node.position.pop(tp, None)
        if node.mode is Mode.INCREMENTAL:
            # (a KIP-848 consumer stays joined: it consumes its other partitions while it reconciles)
            node.state = ConsumerState.REBALANCING
        for tp in event.partitions():
            if tp in node.assignment:
                node.assignment.remove(tp)
            elif node.mode is Mode.INCREMENTAL:
                # (only a KIP-848 consumer closing mid-reconciliation may revoke what it never got)
                self._error(node, f"{tp} revoked but never assigned (assignment {node.assignment})")

    def _handle_records_consumed(self, node: ConsumerNode, event: Event) -> None:
        if node.state is not ConsumerState.JOINED:
            self._error(node, f"records consumed while {node.state.value}")
        for batch in event.body["partitions"]:
            tp = (batch["topic"], batch["partition"])
            low, high = batch["minOffset"], batch["maxOffset"]
            if tp not in node.assignment:
                self._error(node, f"consumed {tp} which is not assigned ({node.assignment})")
            if tp in node.position and node.position[tp] != low:
                self._error(node, f"consumed {tp} from {low}, its position was {node.position[tp]}")
            node.position[tp] = high + 1
            committed = self.global_committed.get(tp)
            if committed is not None and committed > low:
                self._error(
                    node, f"consumed {tp} from {low}, behind the group's committed offset {committed}"
                )
            self.global_position[tp] = high + 1
            self.consumed[tp].update(range(low, high + 1))
            if batch["count"] != high - low + 1:
                self._error(node, f"{tp}: {batch['count']} records in offsets {low}..{high}")
        node.total_consumed += event.body["count"]

    def _handle_offsets_committed(self, node: ConsumerNode, event: Event) -> None:
        if not event.body["success"]:
            return
        for commit in event.body["offsets"]:
            tp, offset = (commit["topic"], commit["partition"]), commit["offset"]
            if tp not in node.assignment:
                self._error(node, f"committed {tp} which is not assigned ({node.assignment})")
            if node.position.get(tp, -1) < offset:
                self._error(
                    node, f"committed {tp} at {offset}, ahead of its position {node.position.get(tp)}"
                )
            if self.global_position.get(tp, -1) < offset:
                self._error(node, f"committed {tp} at {offset}, ahead of the group's position")
            node.committed[tp] = offset
            self.global_committed[tp] = offset

    # -- what the tests ask ---------------------------------------------------------------------

    def joined(self) -> list[int]:
        with self.lock:
            return [n.idx for n in self.nodes if n.state is ConsumerState.JOINED]

    def dead(self) -> list[int]:
        with self.lock:
            return [n.idx for n in self.nodes if n.state is ConsumerState.DEAD]

    def current_assignment(self) -> dict[int, list[TopicPartition]]:
        with self.lock:
            return {n.idx: list(n.assignment) for n in self.nodes}

    def owner(self, tp: TopicPartition) -> int | None:
        with self.lock:
            return next((n.idx for n in self.nodes if tp in n.assignment), None)

    def total_consumed(self) -> int:
        with self.lock:
            return sum(n.total_consumed for n in self.nodes)

    def positions(self) -> dict[TopicPartition, int]:
        with self.lock:
            return dict(self.global_position)

    def last_commits(self) -> dict[TopicPartition, int]:
        with self.lock:
            return dict(self.global_committed)

    def num_rebalances(self) -> int:
        with self.lock:
            return max(n.assigned_count for n in self.nodes)

    def num_revokes_for_alive(self, keep_alive: int = 1) -> int:
        with self.lock:
            return max(n.revoked_count for n in self.nodes[:keep_alive])

    def valid_assignment(self, partitions: int) -> bool:
        """Every partition of the topic assigned, each to one consumer (kafkatest's check)."""
        owned = [tp for a in self.current_assignment().values() for tp in a]
        return sorted(owned) == [(self.topic, p) for p in range(partitions)]

    def balanced_assignment(self, partitions: int) -> bool:
        """A valid assignment spread evenly: no consumer owns two partitions more than another,
        so no revocation of the first rebalances is still on its way (KIP-848's coordinator
        assigns on each heartbeat: the first member to join gets every partition, and gives
        them back as the others arrive)."""
        counts = [len(a) for a in self.current_assignment().values()]
        return self.valid_assignment(partitions) and max(counts) - min(counts) <= 1

    def await_members(self, count: int, timeout: float | None = None) -> None:
        wait_until(
            lambda: len(self.joined()) == count,
            timeout or 2 * self.session_timeout_ms / 1000 + 20,
            f"{count} consumers joined (joined {self.joined()}, errors {self.errors[:3]})",
        )

    def await_consumed(self, min_records: int = 1, timeout: float = 60) -> None:
        before = self.total_consumed()
        wait_until(
            lambda: self.total_consumed() >= before + min_records,
            timeout,
            f"{min_records} more records consumed (consumed {before})",
        )

    def await_position(self, ends: dict[TopicPartition, int], timeout: float = 60) -> None:
        """Until the group has consumed up to ``ends`` (the producer's acknowledged ends)."""
        wait_until(
            lambda: all(self.positions().get(tp, 0) >= end for tp, end in ends.items()),
            timeout,
            f"the group's positions reach {ends} (at {self.positions()})",
        )

    def duplicates(self) -> dict[TopicPartition, int]:
        """Records handed to the application more than once, per partition."""
        with self.lock:
            return {
                tp: n for tp, counts in self.consumed.items() if (n := sum(c - 1 for c in counts.values()))
            }

    def unexplained_duplicates(self) -> dict[TopicPartition, list[int]]:
        """Offsets consumed more often than the at-least-once windows allow (each window lets its
        offsets be handed out once more), per partition: Kafka's delivery guarantee."""
        with self.lock:
            found: dict[TopicPartition, list[int]] = {}
            for tp, counts in self.consumed.items():
                windows = self.redelivery_windows.get(tp, [])
                extra = [o for o, c in counts.items() if c - 1 > sum(o in w for w in windows)]
                if extra:
                    found[tp] = sorted(extra)[:10]
            return found

    def windows(self) -> dict[TopicPartition, list[range]]:
        with self.lock:
            return {tp: list(w) for tp, w in self.redelivery_windows.items() if w}

    def missing(self, acked: dict[TopicPartition, set[int]]) -> dict[TopicPartition, list[int]]:
        """Acknowledged records never consumed by any member, per partition."""
        with self.lock:
            return {
                tp: sorted(gone)[:10]
                for tp, offsets in acked.items()
                if (gone := offsets - self.consumed[tp].keys())
            }

    def ordered_timeline(self) -> list[Event]:
        """Every event in the order it happened: by the JVMs' timestamps, and within one
        millisecond a partition given up before one taken (the revoking consumer's callback
        runs before the rebalance it precedes can complete)."""
        rank = {"killed": 0, "shutdown_complete": 0, "partitions_revoked": 0, "partitions_assigned": 2}
        with self.lock:
            return sorted(self.timeline, key=lambda e: (e.timestamp_ms, rank.get(e.name, 1)))

    def dump(self, path: Path) -> None:
        """The ordered timeline as JSON lines (what to read when a check fails)."""
        with path.open("w") as out:
            for e in self.ordered_timeline():
                out.write(
                    json.dumps({"node": e.node, **e.body, "name": e.name, "timestamp": e.timestamp_ms}) + "\n"
                )

    def double_ownership(self) -> list[str]:
        """Moments at which a partition was assigned to a consumer while another still owned it."""
        owners: dict[TopicPartition, int] = {}
        held: dict[int, set[TopicPartition]] = defaultdict(set)
        found: list[str] = []
        for e in self.ordered_timeline():
            mode = self.nodes[e.node].mode
            if e.name in ("killed", "shutdown_complete", "startup_complete") or (
                e.name == "partitions_revoked" and mode is Mode.EAGER
            ):
                released = set(held[e.node])
            elif e.name == "partitions_revoked":
                released = set(e.partitions())
            elif e.name == "partitions_assigned":
                if mode is Mode.EAGER:
                    for tp in held[e.node]:
                        owners.pop(tp, None)
                    held[e.node] = set()
                for tp in e.partitions():
                    other = owners.get(tp)
                    if other is not None and other != e.node:
                        found.append(
                            f"{tp} assigned to consumer {e.node} at {e.timestamp_ms} while owned by {other}"
                        )
                    owners[tp] = e.node
                    held[e.node].add(tp)
                continue
            else:
                continue
            for tp in released:
                if owners.get(tp) == e.node:
                    del owners[tp]
            held[e.node] -= released
        return found

    def committed_going_back(self) -> list[str]:
        """Successful commits of a partition lower than an earlier successful one."""
        last: dict[TopicPartition, int] = {}
        found: list[str] = []
        for e in self.ordered_timeline():
            if e.name != "offsets_committed" or not e.body["success"]:
                continue
            for commit in e.body["offsets"]:
                tp, offset = (commit["topic"], commit["partition"]), commit["offset"]
                if offset < last.get(tp, -1):
                    found.append(f"{tp} committed {offset} by consumer {e.node} after {last[tp]}")
                last[tp] = max(offset, last.get(tp, -1))
        return found


class VerifiableProducer:
    """Kafka 4.4's ``VerifiableProducer``: increasing integers to ``topic`` (``max_messages``,
    or until stopped) at about ``throughput`` a second, acks=all; what the brokers acknowledged is recorded per
    partition from its ``producer_send_success`` events."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        log: Path,
        *,
        max_messages: int = -1,
        throughput: int = 100,
        repeating_keys: int | None = 60,
    ) -> None:
        self.args = [
            "--bootstrap-server", bootstrap,
            "--topic", topic,
            "--max-messages", str(max_messages),
            "--throughput", str(throughput),
        ]  # fmt: skip
        if repeating_keys:
            # keyed records spread over every partition all the time; unkeyed ones go in bursts of
            # a batch to one partition (the sticky partitioner), leaving partitions idle for seconds
            self.args += ["--repeating-keys", str(repeating_keys)]
        self.topic = topic
        self.log = log
        self.lock = threading.Lock()
        self.acked: dict[TopicPartition, set[int]] = defaultdict(set)
        self.errors: list[str] = []
        # Records the tool was still sending when SIGTERM closed its producer: its shutdown hook
        # closes the producer under the sending thread (Kafka's VerifiableProducer), so they
        # fail with "Producer closed while send in progress". Never acknowledged, so nothing
        # anyone was told is lost; counted apart from real send errors.
        self.closed_while_sending = 0
        self.stopping = False
        self.process: subprocess.Popen[str] | None = None
        self.reader: threading.Thread | None = None

    def start(self) -> VerifiableProducer:
        self.process = start_tool(VERIFIABLE_PRODUCER, *self.args, log=self.log)
        self.reader = threading.Thread(target=self._read, name="verifiable-producer", daemon=True)
        self.reader.start()
        return self

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                if data.get("name") == "producer_send_success":
                    self.acked[(data["topic"], data["partition"])].add(data["offset"])
                elif data.get("name") == "producer_send_error":
                    error = f"{data.get('exception')}: {data.get('message')}"
                    if self.stopping and "Producer closed while send in progress" in error:
                        self.closed_while_sending += 1
                    else:
                        self.errors.append(error)

    @property
    def num_acked(self) -> int:
        with self.lock:
            return sum(len(offsets) for offsets in self.acked.values())

    def await_acked(self, count: int, timeout: float = 60) -> None:
        wait_until(
            lambda: self.num_acked >= count, timeout, f"{count} records acknowledged (acked {self.num_acked})"
        )

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM: the tool flushes what it sent, reports it and exits."""
        assert self.process is not None
        with self.lock:
            self.stopping = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        self.wait(timeout, signal.SIGTERM)

    def wait(self, timeout: float = 120, stopped_by: int = 0) -> None:
        """Until it has sent all its records (or what it had when stopped) and exited."""
        assert self.process is not None and self.reader is not None
        self.process.wait(timeout)
        self.reader.join(timeout)
        # a JVM ended by a signal after its shutdown hooks exits 128 + the signal
        assert self.process.returncode in {0, 128 + stopped_by if stopped_by else 0}, (
            f"VerifiableProducer exited {self.process.returncode}, see {self.log}"
        )

    def ends(self) -> dict[TopicPartition, int]:
        """The next offset after the last acknowledged record, per partition."""
        with self.lock:
            return {tp: max(offsets) + 1 for tp, offsets in self.acked.items()}

    def acknowledged(self) -> dict[TopicPartition, set[int]]:
        with self.lock:
            return {tp: set(offsets) for tp, offsets in self.acked.items()}

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
