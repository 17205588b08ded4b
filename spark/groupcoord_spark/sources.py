"""Where the capacity job reads metric samples from: the metrics topic, or exported JSON files.

The metrics topic is read with Spark's own Kafka source when its connector
(``spark-sql-kafka-0-10``) is on the classpath — the usual case on a cluster, via
``spark-submit --packages``. A plain ``pip install pyspark`` does not ship that connector, so
otherwise the topic is read with a PySpark Python data source (:class:`KafkaTopicDataSource`,
Spark ≥ 4) over aiokafka: one Spark partition per topic partition, each reading from the
earliest offset to the end (at least the end offset captured when the query was planned, and
on until the partition is quiet).
Both produce the columns of Spark's Kafka source (``key``, ``value``, ``topic``, ``partition``,
``offset``, ``timestamp``), so the JSON parsing after them is shared.

Exported files are the JSON values one per line (what ``kafka-console-consumer`` prints, or
what ``groupcoord capacity --export-json DIR`` writes).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from dataclasses import fields
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
    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__(partition)
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


async def topic_offsets(bootstrap: str, topic: str) -> list[tuple[int, int, int]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition  # noqa: PLC0415 - runs in Spark's Python worker

    from groupcoord.common.kafka_security import upstream_security  # noqa: PLC0415 - the worker's environment

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, **upstream_security().aiokafka_options()
    )
    await consumer.start()
    try:
        parts = consumer.partitions_for_topic(topic)
        if parts is None:
            await consumer._client.force_metadata_update()  # first lookup of a topic
            parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return []
        begin = await consumer.beginning_offsets(tps)
        end = await consumer.end_offsets(tps)
        return [(tp.partition, begin[tp], end[tp]) for tp in tps]
    finally:
        await consumer.stop()


async def _read(bootstrap: str, part: _TopicPartition) -> list[tuple[Any, ...]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition  # noqa: PLC0415

    from groupcoord.common.kafka_security import upstream_security  # noqa: PLC0415

    tp = TopicPartition(part.topic, part.partition)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, **upstream_security().aiokafka_options()
    )
    await consumer.start()
    rows: list[tuple[Any, ...]] = []
    try:
        consumer.assign([tp])
        consumer.seek(tp, part.start)
        # ``end`` (captured at planning) is a lower bound: some brokers (tansu) report a
        # lagging end offset, so keep reading until a poll past it comes back empty.
        position = part.start
        while True:
            batch = (await consumer.getmany(tp, timeout_ms=1000, max_records=10000)).get(tp, [])
            for r in batch:
                ts = dt.datetime.fromtimestamp(r.timestamp / 1000, tz=dt.UTC)
                rows.append((r.key, r.value, part.topic, part.partition, r.offset, ts))
            if batch:
                position = batch[-1].offset + 1
            elif position >= part.end:
                break
    finally:
        await consumer.stop()
    return rows


class _KafkaTopicReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.bootstrap = options["bootstrap"]
        self.topic = options["topic"]

    def partitions(self) -> list[InputPartition]:
        found = asyncio.run(topic_offsets(self.bootstrap, self.topic))
        return [_TopicPartition(self.topic, p, start, end) for p, start, end in found]

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
        raw = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
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
