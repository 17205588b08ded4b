"""One Produce request in flight per broker, carrying the batches of every partition queued
while it was out: the state writes of all the partitions a worker leads share the requests to
each broker, as Kafka's coordinator runtime shares its appends (its adaptive linger: a flush
queued behind what is already queued, nothing waiting on a timer).

Why not aiokafka's producer: it sends a partition's batch as soon as it is ready, in a request
of its own when the request before is still out, so eight partitions committing at once cost
the broker eight Produce requests (each a purgatory entry and a replication wait) where one
would do; the broker's CPU per commit was 0.6 ms, most of it per request. Here each broker has
a queue; the request to it carries the first batch of each partition queued (a partition's
next batch goes in the next request, so its batches land in order), and the next request
leaves when the answer comes. A batch is its own in the request, so every partition's
fencing and confirmation stay as they were (each batch's base offset comes back).

Retries are aiokafka's producer's: a batch refused with a retriable error (the leader moved, a
connection lost, not enough replicas) is sent again, to the partition's leader as the metadata
then says, until ``delivery_timeout_s`` has passed since it was first queued; then, and for any
other error, its sender gets the exception ("maybe written", as the writer's contract says).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import TopicPartition
from aiokafka import errors as Errors
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.produce import ProduceRequest

log = logging.getLogger(__name__)

ACKS_ALL = -1


@dataclass(slots=True)
class _Batch:
    topic: str
    partition: int
    data: bytes
    done: asyncio.Future[int]
    deadline: float  # monotonic time past which a retriable error is final


class ProducePerBroker:
    """Sends record batches (v2, built by the caller) with acks=all, one request in flight per
    broker; see the module docstring."""

    def __init__(
        self,
        client: AIOKafkaClient,
        *,
        request_timeout_ms: int = 30000,
        delivery_timeout_s: float = 30.0,
        retry_backoff_s: float = 0.1,
        on_request: Callable[[int], None] | None = None,
    ) -> None:
        """``on_request(batches)``: told of every Produce request sent, with its batch count
        (the shard's ``groupcoord_state_produce_requests_total``)."""
        self._client = client
        self._on_request = on_request
        self._request_timeout_ms = request_timeout_ms
        self._delivery_timeout_s = delivery_timeout_s
        self._retry_backoff_s = retry_backoff_s
        self._queues: dict[int, deque[_Batch]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}

    async def send(self, topic: str, partition: int, data: bytes) -> int:
        """Write one record batch to ``topic``/``partition``; returns its base offset once every
        in-sync replica has it. Raises when it could not be written (maybe it was)."""
        loop = asyncio.get_running_loop()
        batch = _Batch(topic, partition, data, loop.create_future(), time.monotonic() + self._delivery_timeout_s)
        await self._enqueue(batch)
        return await batch.done

    async def close(self) -> None:
        """Stop sending; batches still queued fail (their writers treat it as maybe written)."""
        senders = list(self._senders.values())
        for task in senders:
            task.cancel()
        await asyncio.gather(*senders, return_exceptions=True)
        for queue in self._queues.values():
            for batch in queue:
                if not batch.done.done():
                    batch.done.set_exception(Errors.KafkaConnectionError("the writer stopped"))
            queue.clear()

    async def _enqueue(self, batch: _Batch) -> None:
        node = await self._leader(batch)
        if node is None:
            return  # failed already
        self._queues.setdefault(node, deque()).append(batch)
        if node not in self._senders:
            self._senders[node] = asyncio.get_running_loop().create_task(self._drain(node))

    async def _leader(self, batch: _Batch) -> int | None:
        """The partition's leader, from the metadata (asked again while it has none, within
        the batch's deadline); None after failing the batch."""
        tp = TopicPartition(batch.topic, batch.partition)
        cluster = self._client.cluster
        while True:
            node = cluster.leader_for_partition(tp)
            if node is not None and node != -1:
                return node
            if time.monotonic() >= batch.deadline:
                batch.done.set_exception(Errors.NotLeaderForPartitionError(f"no leader for {tp}"))
                return None
            self._client.add_topic(batch.topic)
            await self._client.force_metadata_update()
            if cluster.leader_for_partition(tp) in (None, -1):
                await asyncio.sleep(self._retry_backoff_s)

    async def _drain(self, node: int) -> None:
        """Requests to ``node`` one after another while batches are queued for it."""
        queue = self._queues[node]
        try:
            while queue:
                taken: list[_Batch] = []
                later: list[_Batch] = []
                named: set[tuple[str, int]] = set()
                while queue:
                    batch = queue.popleft()
                    key = (batch.topic, batch.partition)
                    (later if key in named else taken).append(batch)
                    named.add(key)
                queue.extend(later)
                await self._request(node, taken)
        finally:
            del self._senders[node]

    async def _request(self, node: int, batches: list[_Batch]) -> None:
        topics: dict[str, list[tuple[int, bytes]]] = {}
        for batch in batches:
            topics.setdefault(batch.topic, []).append((batch.partition, batch.data))
        request = ProduceRequest(None, ACKS_ALL, self._request_timeout_ms, list(topics.items()))
        if self._on_request is not None:
            self._on_request(len(batches))
        try:
            response = await self._client.send(node, request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - each batch learns it (or is sent again)
            for batch in batches:
                self._failed(batch, exc)
            return
        answers = {
            (topic, partition): (error_code, offset)
            for topic, partitions in response.topics
            for partition, error_code, offset, *_rest in partitions
        }
        for batch in batches:
            answer = answers.get((batch.topic, batch.partition))
            if answer is None:
                self._failed(batch, Errors.KafkaError(f"no answer for {batch.topic}-{batch.partition}"))
            elif answer[0] != 0:
                self._failed(batch, Errors.for_code(answer[0])(f"produce to {batch.topic}-{batch.partition}"))
            elif not batch.done.done():
                batch.done.set_result(int(answer[1]))

    def _failed(self, batch: _Batch, exc: BaseException) -> None:
        if batch.done.done():
            return
        retriable = isinstance(exc, Errors.KafkaError) and exc.retriable
        if isinstance(exc, Errors.KafkaError) and exc.invalid_metadata:
            self._client.force_metadata_update()
        if not retriable or time.monotonic() + self._retry_backoff_s >= batch.deadline:
            batch.done.set_exception(exc)
            return
        log.debug("%s-%d: %r, sending again", batch.topic, batch.partition, exc)
        asyncio.get_running_loop().call_later(self._retry_backoff_s, self._again, batch)

    def _again(self, batch: _Batch) -> None:
        task = asyncio.get_running_loop().create_task(self._enqueue(batch))
        task.add_done_callback(lambda t: t.cancelled() or t.exception() is None or self._failed_hard(batch, t))

    @staticmethod
    def _failed_hard(batch: _Batch, task: asyncio.Task[None]) -> None:
        exc = task.exception()
        if exc is not None and not batch.done.done():
            batch.done.set_exception(exc)
