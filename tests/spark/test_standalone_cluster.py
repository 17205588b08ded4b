"""The capacity job as it runs on a cluster: ``spark-submit`` to a Spark standalone cluster (one
master, two workers, on loopback, started here from the installed PySpark) with Spark's own Kafka
connector (``spark-sql-kafka-0-10`` from Maven Central, what ``spark-submit --packages`` fetches),
reading the metrics topic of a real Apache Kafka that real sample publishers wrote. Its plan is
the plan of local mode with the Python data source over the same samples: the no-Java-on-the-
cluster fallback and the cluster path agree.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyspark
import pytest

from groupcoord.embedded_broker import free_port
from groupcoord_testing.apache_kafka import ApacheKafka
from tests.real_parts import start_apache_kafka, unavailable
from tests.spark.capacity.test_command import publish_history

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent
COMMAND = ROOT / "spark" / "groupcoord_spark" / "capacity" / "command.py"


def connector_jars() -> list[Path]:
    """The connector of the installed PySpark's version with its runtime dependencies, as
    scripts/test resolves them from tests/spark/pom.xml."""
    base = Path(
        os.environ.get("GROUPCOORD_SPARK_KAFKA_JARS")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "groupcoord" / "spark-kafka"
    )
    folder = base / pyspark.__version__
    jars = sorted(folder.glob("*.jar")) if (folder / ".complete").exists() else []
    if not jars:
        unavailable(
            f"no spark-sql-kafka-0-10 {pyspark.__version__} jars in {folder} (scripts/test resolves them)"
        )
    return jars


def _wait_for_line(log: Path, text: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(
        f"{text!r} not in {log} within {timeout}s:\n{log.read_text(errors='replace')[-3000:]}"
    )


def spark_env() -> dict[str, str]:
    """The environment of every Spark process here: the installed PySpark as Spark, loopback
    only, and this interpreter (with groupcoord) for the Python workers."""
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }


def local_command(master: str, *capacity_args: str) -> list[str]:
    """``groupcoord capacity`` in a Spark session of its own (``--master local[N]``)."""
    return [sys.executable, "-m", "groupcoord.cli", "capacity", "--master", master, *capacity_args]


def submit_command(master: str, jars: list[Path], conf: Mapping[str, str], *capacity_args: str) -> list[str]:
    """``spark-submit`` of the capacity command to ``master`` with the connector ``jars``."""
    confs = [f"spark.pyspark.python={sys.executable}", *(f"{k}={v}" for k, v in conf.items())]
    return [
        str(SPARK_HOME / "bin" / "spark-submit"),
        *("--master", master, "--jars", ",".join(str(j) for j in jars)),
        *(arg for c in confs for arg in ("--conf", c)),
        str(COMMAND),
        *capacity_args,
    ]


@contextlib.contextmanager
def standalone_cluster(work: Path, workers: int = 2) -> Iterator[str]:
    """A Spark standalone master and ``workers`` workers (1 core, 1 GiB each) on 127.0.0.1;
    yields the master URL."""
    env = spark_env()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        master_log = work / "master.log"
        master = subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
            stdout=master_log.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        processes.append(master)
        _wait_for_line(master_log, "I have been elected leader", master, 90)
        for i in range(workers):
            (work / f"worker-{i}").mkdir()
            processes.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(work / f"worker-{i}"),
                        url,
                    ],
                    stdout=(work / f"worker-{i}.log").open("wb"),
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + 90
        while master_log.read_text(errors="replace").count("Registering worker") < workers:
            assert time.monotonic() < deadline, master_log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
        yield url
    finally:
        for p in reversed(processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 15)
        for p in processes:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)


def _close(a: Any, b: Any, path: str = "plan") -> None:
    """Equal plans, numbers to 1e-9 relative (two readers sum in different orders)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float | int) and not isinstance(a, bool):
        assert b == pytest.approx(a, rel=1e-9, abs=1e-12), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def _capacity(bootstrap: str, topic: str, out: Path, reader: str) -> list[str]:
    return ["--bootstrap", bootstrap, "--topic", topic, "--reader", reader, "--out", str(out), "--top", "3"]


def test_spark_submit_on_a_standalone_cluster_with_the_kafka_connector_plans_as_local_mode(
    tmp_path: Path,
) -> None:
    jars = connector_jars()
    kafka: ApacheKafka = start_apache_kafka("kafka-4.4", tmp_path / "kafka")
    try:
        topic = f"metrics-{uuid.uuid4().hex[:8]}"
        truth = asyncio.run(publish_history(kafka.bootstrap, topic))
        started = time.monotonic()
        local = subprocess.run(
            local_command("local[2]", *_capacity(kafka.bootstrap, topic, tmp_path / "local", "python")),
            capture_output=True,
            text=True,
            env=spark_env(),
            timeout=600,
            check=False,
        )
        local_s = time.monotonic() - started
        assert local.returncode == 0, local.stderr[-3000:]
        assert "(python reader)" in local.stderr

        (tmp_path / "spark").mkdir()
        with standalone_cluster(tmp_path / "spark") as master:
            started = time.monotonic()
            submitted = subprocess.run(
                submit_command(
                    master,
                    jars,
                    {"spark.executor.memory": "512m", "spark.sql.shuffle.partitions": "4"},
                    *_capacity(kafka.bootstrap, topic, tmp_path / "cluster", "kafka"),
                ),
                capture_output=True,
                text=True,
                env=spark_env(),
                timeout=600,
                check=False,
            )
            cluster_s = time.monotonic() - started
            (tmp_path / "spark-submit.log").write_text(submitted.stderr)
            assert submitted.returncode == 0, submitted.stderr[-5000:]
            # the connector read the topic (spark-submit relays the driver's Python output on its
            # stdout), and the executors ran on the workers
            assert "(kafka reader)" in submitted.stdout, submitted.stdout[-3000:]
            executors = list((tmp_path / "spark").glob("worker-*/app-*/*"))
            assert {p.parts[-3] for p in executors} == {"worker-0", "worker-1"}, executors
        print(
            f"capacity job: local mode + Python source {local_s:.1f}s, standalone + connector {cluster_s:.1f}s"
        )

        plan_local = json.loads((tmp_path / "local" / "plan.json").read_text())
        plan_cluster = json.loads((tmp_path / "cluster" / "plan.json").read_text())
        assert plan_cluster["history"]["samples"] == truth["published"]
        _close(plan_local, plan_cluster)
    finally:
        kafka.stop()
