"""streams-groups: how long a Kafka Streams 4.4 application (``group.protocol=streams``) takes to
run, through groupcoord and on Kafka 4.4's own streams groups, on the same broker in one run.

The application is the tests' word count (``groupcoord_testing/kafka_streams.py``: a repartition
topic, a changelogged store, ``exactly_once_v2``), ``--instances`` JVMs of it. For each side:
the time from starting them until every instance is RUNNING with every task active on exactly
one of them, then the time from killing one (-9) until the others run every task again (both
sides fence the killed member after the same 45 s session timeout, Kafka's default, so that
figure is mostly that timeout). Kafka's side uses its broker directly; groupcoord's, the gateway
in front of that broker (2 coordinator processes). Each side gets its own application id.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from pathlib import Path

NAME = "streams-groups"
DESCRIPTION = "Kafka Streams 4.4 start and kill -9 recovery, groupcoord vs Kafka 4.4's own streams groups"

TASKS = {f"{s}_{p}" for s in (0, 1) for p in range(6)}  # two subtopologies over 6-partition input


def _spread(instances: list) -> bool:
    tasks = [i.tasks() for i in instances]
    if not all(i.running() for i in instances) or not all(tasks):
        return False
    return sorted(t for ts in tasks for t in ts or ()) == sorted(TASKS)


def _until(check: object, timeout_s: float, instances: list) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if check():  # type: ignore[operator]
            return round(time.monotonic() - started, 2)
        if any(i.process.poll() is not None for i in instances):
            raise RuntimeError("an instance exited:\n" + "\n".join(i.report() for i in instances))
        time.sleep(0.2)
    raise RuntimeError("timed out:\n" + "\n".join(i.report() for i in instances))


def _side(bootstrap: str, workdir: Path, instances: int) -> dict[str, float]:
    from groupcoord_testing.kafka_streams import Instance  # noqa: PLC0415

    app = f"bench-wordcount-{uuid.uuid4().hex[:6]}"
    started = [Instance(bootstrap, app, workdir, f"{app}-{n}") for n in range(instances)]
    try:
        start_s = _until(lambda: _spread(started), 300, started)
        started[0].kill()
        rest = started[1:]
        recover_s = _until(lambda: _spread(rest), 300, rest)
    finally:
        for instance in started:
            if instance.process.poll() is None:
                instance.stop()
    return {"start_to_running_s": start_s, "kill_to_recovered_s": recover_s}


def run(args: list[str]) -> dict[str, object]:
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    from groupcoord.local_cluster import ClusterOptions  # noqa: PLC0415
    from groupcoord_testing import BackgroundCluster  # noqa: PLC0415
    from groupcoord_testing.apache_kafka import ApacheKafka  # noqa: PLC0415
    from groupcoord_testing.kafka_streams import word_count_classes  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=NAME)
    parser.add_argument("--instances", type=int, nargs="+", default=[3])
    opts = parser.parse_args(args)
    word_count_classes()  # compiled before anything is timed
    load_before = os.getloadavg()
    results = []
    with ApacheKafka(Path(f"/tmp/{NAME}-{uuid.uuid4().hex[:6]}")) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        for future in admin.create_topics([NewTopic("lines", 6, 1), NewTopic("counts", 6, 1)]).values():
            future.result(30)
        options = ClusterOptions(port=0, partitions=8, shards=2, metrics=False, adopt_upstream_groups=False)
        with BackgroundCluster((kafka.host, kafka.port), options) as cluster:
            host, port = cluster.gateway.bootstrap_address
            for n in opts.instances:
                workdir = Path(f"/tmp/{NAME}-{uuid.uuid4().hex[:6]}")
                workdir.mkdir(parents=True)
                theirs = _side(kafka.bootstrap, workdir, n)
                ours = _side(f"{host}:{port}", workdir, n)
                results.append(
                    {
                        "instances": n,
                        "kafka": theirs,
                        "groupcoord": ours,
                        "start_ratio": round(ours["start_to_running_s"] / theirs["start_to_running_s"], 2),
                        "recovery_ratio": round(ours["kill_to_recovered_s"] / theirs["kill_to_recovered_s"], 2),
                    }
                )
    return {
        "runs": results,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
