"""Where the capacity job reads metric samples from: the metrics topic, or exported JSON files.

The metrics topic is read with Spark's own Kafka source when its connector
(``spark-sql-kafka-0-10``) is on the classpath — the usual case on a cluster, via
``spark-submit --packages``. A plain ``pip install pyspark`` does not ship that connector, so
otherwise the topic is read with a PySpark Python data source (:class:`KafkaTopicDataSource`,
Spark ≥ 4) over aiokafka: one Spark partition per topic partition, each reading from the
first record to the high watermark a Fetch reports. Spark's source is given the same offsets
(:func:`topic_offsets`), not ListOffsets' ``earliest`` and ``latest``, which tansu misreports.
Both produce the columns of Spark's Kafka source (``key``, ``value``, ``topic``, ``partition``,
``offset``, ``timestamp``), so the JSON parsing after them is shared.

Exported files are the JSON values one per line (what ``kafka-console-consumer`` prints, or
what ``groupcoord capacity --export-json DIR`` writes).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from groupcoord.observability.metric_samples import MetricSample

KAFKA_COLUMNS = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
KAFKA_CONNECTOR_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
PYTHON_SOURCE_NAME = "groupcoord_kafka"


def spark_type(hint: Any) -> T.DataType:
    """The Spark type of a :class:`MetricSample` field's Python type (JSON numbers are read as
    64-bit integers or doubles, objects with string keys as maps, ``TypedDict`` classes as structs)."""
    if hint is str:
        return T.StringType()
    if hint is int:
        return T.LongType()
    if hint is float:
        return T.DoubleType()
    if is_typeddict(hint):
        return T.StructType([T.StructField(k, spark_type(v)) for k, v in get_type_hints(hint).items()])
    origin, args = get_origin(hint), get_args(hint)
    if origin is dict and args[0] is str:
        return T.MapType(T.StringType(), spark_type(args[1]))
    if origin is list:
        return T.ArrayType(spark_type(args[0]))
    raise TypeError(f"no Spark type for metric sample field type {hint!r}")


_HINTS = get_type_hints(MetricSample)
SAMPLE_SCHEMA = T.StructType(
    [T.StructField(f.name, spark_type(_HINTS[f.name])) for f in fields(MetricSample)]
)
"""One column per :class:`MetricSample` field: the schema is defined once, by the publisher."""


class _TopicPartition(InputPartition):
    def __init__(self, topic: str, partition: int) -> None:
        super().__init__(partition)
        self.topic = topic
        self.partition = partition


READ_DEADLINE_S = 120.0
"""How long a read may go without reaching the high watermark before it fails (never cut short)."""


@dataclass
class _Scanned:
    """What :func:`_scan` saw of one partition."""

    first: int | None = None  # the first record's offset
    position: int = 0  # past the last record read
    high_watermark: int | None = None
    records: list[Any] = field(default_factory=list)

    def take(self, batch: list[Any], keep: bool) -> None:
        if not batch:
            return
        if self.first is None:
            self.first = batch[0].offset
        self.position = batch[-1].offset + 1
        if keep:
            self.records.extend(batch)

    def done(self, keep: bool) -> bool:
        if self.high_watermark is None:
            return False
        if self.position >= self.high_watermark:
            return True
        return not keep and self.first is not None

    @property
    def offsets(self) -> tuple[int, int]:
        """(first offset, end offset); equal for an empty partition."""
        end = self.high_watermark or 0
        return (end if self.first is None else self.first), end


async def _scan(bootstrap: str, topic: str, partitions: list[int] | None, keep: bool) -> dict[int, _Scanned]:
    """Read the partitions (all of the topic's when ``None``) from their first record to the high
    watermark of a Fetch response. Both ends come from Fetch, not from ListOffsets: tansu answers
    ``latest`` with the base offset of the last batch plus one (the rest of that batch would be
    left out) and at times ``earliest`` past records it still serves. So the read starts at
    offset 0 (a broker whose log starts later answers OFFSET_OUT_OF_RANGE, and the consumer moves
    to ``earliest``), and ends only at the high watermark: an empty poll is no proof of the end
    on a loaded machine, where a fetch can take longer than the poll waits. Without ``keep`` it
    stops at each partition's first record."""
    from aiokafka import AIOKafkaConsumer, TopicPartition  # noqa: PLC0415 - runs in Spark's Python worker

    from groupcoord.common.kafka_security import upstream_security  # noqa: PLC0415 - the worker's environment

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **upstream_security().aiokafka_options(),
    )
    await consumer.start()
    try:
        if partitions is None:
            found = consumer.partitions_for_topic(topic)
            if found is None:
                await consumer._client.force_metadata_update()  # first lookup of a topic
                found = consumer.partitions_for_topic(topic) or set()
            partitions = sorted(found)
        tps = {p: TopicPartition(topic, p) for p in partitions}
        if not tps:
            return {}
        consumer.assign(list(tps.values()))
        for tp in tps.values():
            consumer.seek(tp, 0)
        scanned = {p: _Scanned() for p in tps}
        deadline = asyncio.get_running_loop().time() + READ_DEADLINE_S
        while True:
            for tp, batch in (await consumer.getmany(timeout_ms=1000, max_records=10000)).items():
                scanned[tp.partition].take(batch, keep)
            for p, tp in tps.items():
                scanned[p].high_watermark = consumer.highwater(tp)
            if all(s.done(keep) for s in scanned.values()):
                return scanned
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{topic}: not read to its end in {READ_DEADLINE_S:.0f} s")
    finally:
        await consumer.stop()


async def topic_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """Partition -> (first record's offset, end offset), as Fetch reports them (see :func:`_scan`)."""
    return {p: s.offsets for p, s in (await _scan(bootstrap, topic, None, keep=False)).items()}


async def _read(bootstrap: str, part: _TopicPartition) -> list[tuple[Any, ...]]:
    scanned = await _scan(bootstrap, part.topic, [part.partition], keep=True)
    return [
        (
            r.key,
            r.value,
            part.topic,
            part.partition,
            r.offset,
            dt.datetime.fromtimestamp(r.timestamp / 1000, tz=dt.UTC),
        )
        for r in scanned[part.partition].records
    ]


class _KafkaTopicReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.bootstrap = options["bootstrap"]
        self.topic = options["topic"]

    def partitions(self) -> list[InputPartition]:
        found = asyncio.run(topic_offsets(self.bootstrap, self.topic))
        return [_TopicPartition(self.topic, p) for p in found]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, _TopicPartition)
        yield from asyncio.run(_read(self.bootstrap, partition))


class KafkaTopicDataSource(DataSource):
    """Batch read of a whole Kafka topic (options ``bootstrap``, ``topic``) with aiokafka."""

    @classmethod
    def name(cls) -> str:
        return PYTHON_SOURCE_NAME

    def schema(self) -> str:
        return KAFKA_COLUMNS

    def reader(self, schema: T.StructType) -> DataSourceReader:
        return _KafkaTopicReader(dict(self.options))


def kafka_connector_available(spark: SparkSession) -> bool:
    """Is Spark's own Kafka source on the classpath of this (classic, JVM-backed) session?"""
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        loader = jvm.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(KAFKA_CONNECTOR_CLASS, False, loader)
        return True
    except Exception:
        return False


def parse_samples(raw: DataFrame) -> DataFrame:
    """Kafka-shaped rows (``value`` holds the JSON) → one row per sample with :data:`SAMPLE_SCHEMA`."""
    parsed = raw.select(F.from_json(F.col("value").cast("string"), SAMPLE_SCHEMA).alias("s")).select("s.*")
    return parsed.where(F.col("ts").isNotNull() & F.col("shard").isNotNull())


def read_metrics_topic(
    spark: SparkSession, bootstrap: str, topic: str, *, prefer: str = "auto"
) -> tuple[DataFrame, str]:
    """The metric samples in ``topic``; returns ``(samples, reader)`` where reader is ``"kafka"``
    (Spark's connector) or ``"python"`` (the aiokafka data source). ``prefer`` forces one."""
    use_spark = prefer == "kafka" or (prefer == "auto" and kafka_connector_available(spark))
    if use_spark:
        # explicit offsets, not "earliest"/"latest": the connector would take them from ListOffsets
        offsets = asyncio.run(topic_offsets(bootstrap, topic))
        starting = (
            json.dumps({topic: {str(p): first for p, (first, _) in offsets.items()}})
            if offsets
            else "earliest"
        )
        ending = (
            json.dumps({topic: {str(p): end for p, (_, end) in offsets.items()}}) if offsets else "latest"
        )
        raw = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", starting)
            .option("endingOffsets", ending)
            .load()
        )
        return parse_samples(raw), "kafka"
    spark.dataSource.register(KafkaTopicDataSource)
    raw = spark.read.format(PYTHON_SOURCE_NAME).option("bootstrap", bootstrap).option("topic", topic).load()
    return parse_samples(raw), "python"


def read_sample_files(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Exported samples: JSON lines files (or directories of them)."""
    df = spark.read.schema(SAMPLE_SCHEMA).json(paths)
    return df.where(F.col("ts").isNotNull() & F.col("shard").isNotNull())
