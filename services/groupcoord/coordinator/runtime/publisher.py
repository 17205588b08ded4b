"""Writes to other topics of the upstream cluster for the shards: the host's half of a
:class:`~groupcoord.coordinator.core.contract.Publish` (a share group's dead letters, KIP-1191).

Kafka's broker writes a share group's dead letters itself (``ShareGroupDLQStateManager``), with
the broker's identity, to the topic the group's config names; we do it with the coordinator's
identity (the worker's state-topic producer, acks=all), so the operator's bounds come first,
in Kafka's order (``ShareGroupDLQValidator``): never one of the coordinator's own topics, the
name's required prefix, the topic's own opt-in config where the cluster knows it, and a missing
topic created only if allowed. Then, per publication, one partition of the topic:

1. when asked to deduplicate (a new leader resuming its predecessor's writes), the records
   already in that partition since the given time are read back, and those whose identity
   headers match are not written again;
2. records that copy a source record get its key and value (read with one pass over the source
   partition; a record that is gone is written headers only, as Kafka does; Kafka 4.4 copies
   no source headers, and neither do we);
3. the records go in batches of at most the topic's ``max.message.bytes``, each retried a few
   times with backoff on a retriable error, as Kafka's DLQ manager retries (5 attempts).

The outcome says what was written and how many produce requests it took and lost; the
process's metrics facade counts it under the publication's ``metric``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka import errors as Errors
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError

from groupcoord.common.kafka_security import KafkaSecurity, upstream_security
from groupcoord.coordinator.core.contract import OutboundRecord, Publication, PublishOutcome
from groupcoord.coordinator.runtime.statelog import MAX_BATCH_BYTES, PartitionReader, StateLogWriter

log = logging.getLogger(__name__)

ATTEMPTS = 5  # Kafka's MAX_REQUEST_ATTEMPTS of the DLQ manager
BACKOFF_S = (0.1, 0.2, 0.5, 1.0)
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
# When the cluster cannot say where a time falls in a partition (tansu), dedupe reads at most
# this many records back from its end.
DEDUPE_FALLBACK_RECORDS = 10_000
# The clocks of two coordinator processes may differ: look back this much further.
CLOCK_SKEW_MS = 60_000
# How long reading a DLQ partition back may take before the copies are written anyway (at
# least once: a copy written twice is better than one lost).
DEDUPE_READ_S = 15.0


class Refused(Exception):
    """The publication may not be written (its topic breaks the operator's rule)."""


class Publisher:
    """One per worker process: carries out the publications of every partition it leads."""

    def __init__(
        self,
        bootstrap: str,
        writer: StateLogWriter,
        forbidden_topics: Collection[str] = (),
        security: KafkaSecurity | None = None,
        metrics: Any = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._writer = writer
        self._forbidden = frozenset(forbidden_topics)
        self._security = security
        self._metrics = metrics
        self._admin: AIOKafkaAdminClient | None = None

    async def close(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            await admin.close()

    async def __call__(self, publication: Publication) -> PublishOutcome:
        try:
            outcome = await self._publish(publication)
        except Refused as exc:
            log.warning("publication to %r refused: %s", publication.topic, exc)
            outcome = PublishOutcome(0, 1, 1, str(exc))
        except Exception as exc:  # noqa: BLE001 - the cluster failed us; the shard archives anyway
            log.warning("publication to %r failed: %r", publication.topic, exc)
            outcome = PublishOutcome(0, 1, 1, repr(exc))
        if self._metrics is not None and publication.metric:
            self._metrics.record_publication(publication.metric, outcome)
        return outcome

    async def _admin_client(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            admin = AIOKafkaAdminClient(
                bootstrap_servers=self._bootstrap, **upstream_security(self._security).aiokafka_options()
            )
            await admin.start()
            self._admin = admin
        return self._admin

    async def _publish(self, publication: Publication) -> PublishOutcome:
        partitions, max_bytes = await self._checked_topic(publication)
        partition = publication.partition_of % partitions
        records = list(publication.records)
        if publication.deduplicate_since_ms is not None:
            written = await self._already_written(publication, partition)
            identity = publication.identity_headers
            records = [r for r in records if _identity(r.headers, identity) not in written]
        if not records:
            return PublishOutcome(len(publication.records))
        records = await self._with_copies(records)
        requests = failed = 0
        for batch in _batches(records, max_bytes):
            for attempt in range(ATTEMPTS):
                requests += 1
                try:
                    await self._writer.send_records(publication.topic, partition, batch)
                    break
                except Errors.KafkaError as exc:
                    failed += 1
                    if not exc.retriable or attempt == ATTEMPTS - 1:
                        raise
                    await asyncio.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
        return PublishOutcome(len(publication.records), requests, failed)

    async def _checked_topic(self, publication: Publication) -> tuple[int, int]:
        """The topic's partition count and max.message.bytes, once it passed the rule (created
        first if it is missing and the rule allows)."""
        topic, rule = publication.topic, publication.rule
        if not topic:
            raise Refused("no topic configured")
        if topic in self._forbidden or topic.startswith("__"):
            raise Refused(f"{topic} is internal")
        if rule.required_prefix and not topic.startswith(rule.required_prefix):
            raise Refused(f"{topic} does not start with the required prefix {rule.required_prefix}")
        admin = await self._admin_client()
        if topic not in await admin.list_topics():
            if not rule.create_if_missing:
                raise Refused(f"topic {topic} does not exist, and creating it is not enabled")
            configs = dict([rule.required_config]) if rule.required_config else {}
            try:
                await _create(admin, topic, configs)
            except Errors.KafkaError:
                if not configs:
                    raise
                # a cluster that knows no such topic config (Kafka 3.x, tansu): without it
                await _create(admin, topic, {})
        (described,) = await admin.describe_topics([topic])
        if described.get("error_code"):
            raise Refused(f"topic {topic}: error {described['error_code']}")
        partitions = len(described["partitions"])
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        [resource] = response.resources
        configs = {entry[0]: entry[1] for entry in resource[4]}
        if rule.required_config is not None:
            name, value = rule.required_config
            if name in configs and str(configs[name]).lower() != value:
                raise Refused(f"{name} is not {value} on topic {topic}")
        max_bytes = int(configs.get("max.message.bytes") or DEFAULT_MAX_MESSAGE_BYTES)
        return max(partitions, 1), min(max_bytes, MAX_BATCH_BYTES)

    async def _already_written(self, publication: Publication, partition: int) -> set[tuple[bytes, ...]]:
        """The identities of the records in ``partition`` of the topic since the publication's
        ``deduplicate_since_ms`` (less the clock skew allowed between processes), up to the
        partition's high watermark as a fetch gives it (tansu's ListOffsets "latest" stops at
        the last batch's base offset)."""
        assert publication.deduplicate_since_ms is not None
        tp = TopicPartition(publication.topic, partition)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            enable_auto_commit=False,
            **upstream_security(self._security).aiokafka_options(),
        )
        await consumer.start()
        try:
            first = (await consumer.beginning_offsets([tp]))[tp]
            start: int | None = None
            with contextlib.suppress(Exception):  # a cluster that cannot search by time
                since = max(publication.deduplicate_since_ms - CLOCK_SKEW_MS, 0)
                found = (await consumer.offsets_for_times({tp: since})).get(tp)
                start = found.offset if found is not None else None
            latest = (await consumer.end_offsets([tp]))[tp]
        finally:
            await consumer.stop()
        # no record at or after the time (by the cluster's answer): look at the last ones
        # anyway, as far back as the fallback allows, since "latest" may fall short
        start = max(first, latest - DEDUPE_FALLBACK_RECORDS) if start is None else max(start, first)
        reader = PartitionReader(self._bootstrap, publication.topic, partition, start, self._security)
        seen: set[tuple[bytes, ...]] = set()
        deadline = asyncio.get_running_loop().time() + DEDUPE_READ_S
        try:
            while reader.highwater is None or reader.position < reader.highwater:
                if asyncio.get_running_loop().time() > deadline:  # write rather than lose one
                    log.warning("%s: read back only to %d of %s: some copies may be written twice", tp, reader.position, reader.highwater)
                    break
                for record in await reader.read(timeout_ms=100):
                    seen.add(_identity(record.headers or (), publication.identity_headers))
        finally:
            await reader.stop()
        return seen

    async def _with_copies(self, records: list[OutboundRecord]) -> list[OutboundRecord]:
        """``records`` with the key and value of the source records they copy (read
        with one pass over each source partition's span); a source record that cannot be read
        leaves its record headers only."""
        spans: dict[tuple[str, int], tuple[int, int]] = {}
        for r in records:
            if r.copy_of is not None:
                topic, partition, offset = r.copy_of
                low, high = spans.get((topic, partition), (offset, offset))
                spans[(topic, partition)] = (min(low, offset), max(high, offset))
        if not spans:
            return records
        sources: dict[tuple[str, int, int], Any] = {}
        for (topic, partition), (low, high) in spans.items():
            reader = PartitionReader(self._bootstrap, topic, partition, low, self._security)
            try:
                async for chunk in reader.chunks_until(high + 1, timeout_s=5.0):
                    for record in chunk:
                        sources[(topic, partition, record.offset)] = record
            except Exception as exc:  # noqa: BLE001 - gone by retention, a partition moved: headers only
                log.info("could not read %s-%d at %d..%d to copy: %r", topic, partition, low, high, exc)
            finally:
                await reader.stop()
        out = []
        for r in records:
            source = sources.get(r.copy_of) if r.copy_of is not None else None
            if source is None:
                out.append(r)
                continue
            key = None if source.key is None else bytes(source.key)
            value = None if source.value is None else bytes(source.value)
            out.append(OutboundRecord(key, value, r.headers))
        return out


async def _create(admin: AIOKafkaAdminClient, topic: str, configs: dict[str, str]) -> None:
    """Create ``topic``: one partition, replicated as Kafka's internal topics are (3, or as many
    brokers as there are); one that exists already is fine."""
    brokers = len((await admin.describe_cluster()).get("brokers") or ()) or 1
    response = await admin.create_topics([NewTopic(topic, 1, min(3, brokers), topic_configs=configs)])
    for _name, code, *_ in response.topic_errors:
        if code and code != TopicAlreadyExistsError.errno:
            raise Errors.for_code(code)(f"creating {topic}")


def _identity(headers: Iterable[tuple[str, Any]], names: tuple[str, ...]) -> tuple[bytes, ...]:
    """What tells one dead letter from another: the values of its ``names`` headers (the
    source's group, topic, partition and offset), of a record to write or one read back."""
    values = {k: bytes(v) for k, v in headers}
    return tuple(values.get(h, b"") for h in names)


def _size(record: OutboundRecord) -> int:
    """An upper bound of the record's bytes in a batch."""
    return (
        40
        + len(record.key or b"")
        + len(record.value or b"")
        + sum(len(k) + len(v) + 10 for k, v in record.headers)
    )


def _batches(records: list[OutboundRecord], max_bytes: int) -> list[list[OutboundRecord]]:
    """Records in batches of at most ``max_bytes`` each (a record larger on its own goes alone,
    for the broker to refuse: Kafka's DLQ manager does the same rather than stall)."""
    out: list[list[OutboundRecord]] = []
    size = 0
    for record in records:
        n = _size(record)
        if not out or size + n > max_bytes - 61:
            out.append([])
            size = 0
        out[-1].append(record)
        size += n
    return out
