"""The partitions one worker process hosts, and how leadership is applied to them.

A shard process (``groupcoord shard``) runs ``--threads`` worker processes; each hosts the
state-topic partitions ``p`` with ``p % workers == worker`` in one :class:`WorkerRuntime`, one
:class:`~.partition_loop.PartitionRuntime` (and so one coordinator shard) per partition.

A control plane states the *desired* role of each partition (leader at epoch E, hot standby, or
nothing); :class:`WorkerRuntime` drives every partition towards it, one transition at a time per
partition (a lock each), loads in the background, and retries a failed partition while it is
still wanted. A partition fenced by a newer leader is not retried under the same or an older
epoch: that would depose the rightful leader in turn (same epoch) or fail again (older).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.common.heap import space_out_full_collections
from groupcoord.common.partitioning import worker_for
from groupcoord.coordinator.core.contract import CoordinatorOperation
from groupcoord.coordinator.runtime.partition_loop import PartitionRuntime
from groupcoord.coordinator.runtime.partition_state import PartitionState
from groupcoord.coordinator.runtime.publisher import Publisher
from groupcoord.coordinator.runtime.replicas import ShardFactory
from groupcoord.coordinator.runtime.statelog import StateLogWriter
from groupcoord.coordinator.runtime.write_pipeline import Fenced
from groupcoord.observability.shard_metrics import ShardMetrics

log = logging.getLogger(__name__)


class RoleKind(enum.Enum):
    LEADER = "leader"
    STANDBY = "standby"


@dataclass(frozen=True, slots=True)
class Role:
    """Desired role of a partition: leader at ``epoch``, or hot standby (no epoch)."""

    kind: RoleKind
    epoch: int = -1

    @classmethod
    def leader(cls, epoch: int) -> Role:
        return cls(RoleKind.LEADER, epoch)

    @classmethod
    def standby(cls) -> Role:
        return cls(RoleKind.STANDBY)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    state: PartitionState
    epoch: int
    queue_size: int
    load_time_ms: int | None
    records_loaded: int
    group_counts: dict[str, int]
    error: str | None


class WorkerRuntime:
    """The state-topic partitions of one worker process (``partition % workers == worker``).

    ``shard_id`` is the id of the shard process the worker belongs to (written into its epoch
    markers); it is not a coordinator shard, of which the worker hosts one per partition.
    """

    def __init__(
        self,
        *,
        bootstrap: str,
        topic: str,
        partitions: int,
        shard_factory: ShardFactory,
        shard_id: str = "0",
        worker: int = 0,
        workers: int = 1,
        retry_backoff_s: float = 1.0,
        writer: StateLogWriter | None = None,
        metrics: ShardMetrics | None = None,
        other_topics: Collection[str] = (),
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        # The coordinator's own topics, the state topic and ``other_topics`` (the metrics
        # topic): internal, as Kafka's are; hosted services keep clients' regexes off them.
        self.coordinator_topics = frozenset({topic, *other_topics})
        self.partitions = partitions
        self.shard_id = shard_id
        self.worker = worker
        self.workers = workers
        self.writer = (
            writer
            if writer is not None
            else StateLogWriter(
                bootstrap, topic, on_produce_request=metrics.record_state_produce_request if metrics else None
            )
        )
        # writes to other topics the shards ask for (a share group's dead letters), never to ours
        self.publisher = Publisher(bootstrap, self.writer, self.coordinator_topics, metrics=metrics)
        self._factory = shard_factory
        self.metrics = metrics
        if metrics is not None:
            metrics.add_thread(str(worker))
        self._retry_backoff_s = retry_backoff_s
        self._parts: dict[int, PartitionRuntime] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._desired: dict[int, Role] = {}
        self._fenced_at: dict[int, int] = {}
        self._background: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        space_out_full_collections()  # a worker's state churns: see groupcoord.common.heap
        await self.writer.start()

    async def close(self) -> None:
        for t in list(self._background):
            t.cancel()
        self._desired.clear()
        for p in list(self._parts.values()):
            await p.stop()
        await self.publisher.close()
        await self.writer.stop()

    def owns(self, partition: int) -> bool:
        return 0 <= partition < self.partitions and worker_for(partition, self.workers) == self.worker

    # --- requests ---------------------------------------------------------------------------

    def submit(
        self, partition: int, operation: CoordinatorOperation[Any, Any], *, every_replica: bool = False
    ) -> asyncio.Future[Any]:
        """Run ``operation`` on ``partition``'s loop; the future resolves after its records are
        written, confirmed and committed (or at once for a read). See
        :meth:`~.partition_loop.PartitionRuntime.submit` for ``every_replica``."""
        part = self._parts.get(partition)
        if part is None:
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            fut.set_exception(
                CoordinatorError(ErrorCode.not_coordinator, f"partition {partition} not led here")
            )
            return fut
        return part.submit(operation, every_replica=every_replica)

    # --- leadership -------------------------------------------------------------------------

    async def become_leader(self, partition: int, epoch: int) -> None:
        """Lead ``partition`` at ``epoch``; returns once loaded (raises if fenced or failed)."""
        self._check_owned(partition)
        self._desired[partition] = Role.leader(epoch)
        await self._reconcile(partition, raise_errors=True)

    async def start_standby(self, partition: int) -> None:
        self._check_owned(partition)
        self._desired[partition] = Role.standby()
        await self._reconcile(partition, raise_errors=True)

    async def resign(self, partition: int) -> None:
        """Stop leading (or tailing) ``partition`` now; pending requests get NOT_COORDINATOR."""
        self._desired.pop(partition, None)
        await self._reconcile(partition, raise_errors=True)

    def apply_leadership(self, leaders: dict[int, int], standbys: set[int]) -> None:
        """Make the given roles (for partitions this worker owns) the complete desired state.

        Resignations and loads run in the background; ``status()`` shows progress.
        """
        wanted: dict[int, Role] = {p: Role.standby() for p in standbys if self.owns(p)}
        wanted.update({p: Role.leader(e) for p, e in leaders.items() if self.owns(p)})
        touched = set(self._desired) | set(self._parts) | set(wanted)
        self._desired = wanted
        for p in touched:
            self._spawn(self._reconcile(p, raise_errors=False))

    async def settle(self) -> None:
        """Wait until background transitions have finished (for tests and tooling)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def status(self) -> list[PartitionInfo]:
        out = []
        for p in sorted(self._parts):
            part = self._parts[p]
            shard = part.committed_shard
            out.append(
                PartitionInfo(
                    partition=p,
                    state=part.state,
                    epoch=part.epoch,
                    queue_size=part.queue_size,
                    load_time_ms=part.load_time_ms,
                    records_loaded=part.records_loaded,
                    group_counts=shard.metrics().group_counts() if shard is not None else {},
                    error=part.error,
                )
            )
        return out

    def publish_metrics(self) -> None:
        """Push partition states, queue sizes and each shard's gauges to the metrics facade (the
        worker calls this every second; cheap: no group is walked by the runtime)."""
        m = self.metrics
        if m is None:
            return
        states: dict[int, str] = {}
        for p, part in self._parts.items():
            if part.state is PartitionState.STOPPED:
                continue
            states[p] = part.state.value
            m.set_event_queue_size(p, part.queue_size)
            shard = part.committed_shard
            if shard is None or part.state is not PartitionState.ACTIVE:
                continue
            shard.metrics().export(p, m)  # the shard's gauges: which, and how named, is the shard's
            transactions = shard.transactions()
            if transactions is not None:
                m.set_pending_transactional_offsets(p, transactions.transaction_stats()[0])
        m.set_partition_states(states)

    def active_partitions(self) -> list[tuple[int, int]]:
        """(partition, epoch) of every partition this worker currently leads and serves."""
        return [(p, part.epoch) for p, part in self._serving()]

    def loaded_partitions(self) -> list[tuple[int, int]]:
        """(partition, its load id) of every partition this worker serves: a reload, even at
        the same epoch (after a failure), is a fresh shard, which news from outside the log
        (topic metadata) must reach again."""
        return [(p, part.load_id) for p, part in self._serving()]

    def _serving(self) -> list[tuple[int, PartitionRuntime]]:
        return [(p, part) for p, part in sorted(self._parts.items()) if part.state is PartitionState.ACTIVE]

    def led_partitions(self) -> list[int]:
        """Partitions the control plane wants this worker to lead (loaded or not)."""
        return sorted(p for p, role in self._desired.items() if role.kind is RoleKind.LEADER)

    def leads_anything(self) -> bool:
        """Whether a partition is (or is meant to be) led here: what a draining worker waits
        to lose before it stops."""
        if self.led_partitions():
            return True
        return any(
            part.state in (PartitionState.ACTIVE, PartitionState.LOADING) for part in self._parts.values()
        )

    def partition(self, partition: int) -> PartitionRuntime | None:
        return self._parts.get(partition)

    # --- internals --------------------------------------------------------------------------

    def _check_owned(self, partition: int) -> None:
        if not self.owns(partition):
            raise ValueError(f"partition {partition} belongs to worker {worker_for(partition, self.workers)}")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _part(self, partition: int) -> PartitionRuntime:
        part = self._parts.get(partition)
        if part is None:
            part = PartitionRuntime(
                partition,
                bootstrap=self.bootstrap,
                topic=self.topic,
                writer=self.writer,
                shard_factory=self._factory,
                shard_id=self.shard_id,
                on_failure=self._failed,
                metrics=self.metrics,
                thread=str(self.worker),
                publisher=self.publisher,
            )
            self._parts[partition] = part
        return part

    async def _reconcile(self, partition: int, *, raise_errors: bool) -> None:
        lock = self._locks.setdefault(partition, asyncio.Lock())
        async with lock:
            role = self._desired.get(partition)
            part = self._parts.get(partition)
            try:
                if role is None:
                    if part is not None:
                        await part.stop()
                        del self._parts[partition]
                elif role.kind is RoleKind.STANDBY:
                    if part is None or part.state is not PartitionState.STANDBY:
                        await self._part(partition).start_standby()
                else:
                    if part is not None and part.state is PartitionState.ACTIVE and part.epoch == role.epoch:
                        return
                    if self._fenced_at.get(partition, -1) >= role.epoch:
                        log.warning(
                            "partition %d: not retaking epoch %d, fenced under it", partition, role.epoch
                        )
                        return
                    await self._part(partition).become_leader(role.epoch)
            except Fenced:
                self._fenced_at[partition] = role.epoch if role is not None else -1
                if raise_errors:
                    raise
            except Exception:
                log.exception("partition %d: transition failed", partition)
                if raise_errors:
                    raise
                self._retry_later(partition)

    def _retry_later(self, partition: int) -> None:
        async def retry() -> None:
            await asyncio.sleep(self._retry_backoff_s)
            if partition in self._desired:
                await self._reconcile(partition, raise_errors=False)

        self._spawn(retry())

    def _failed(self, part: PartitionRuntime, exc: BaseException) -> None:
        """A running partition failed (write error, replay error) or was fenced."""
        if isinstance(exc, Fenced):
            self._fenced_at[part.partition] = part.epoch
            return
        self._retry_later(part.partition)
