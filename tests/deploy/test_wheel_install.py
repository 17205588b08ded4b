"""A regular install works: the wheel ``pip wheel .`` builds from the repository's files,
installed into a fresh venv, runs ``groupcoord up`` and serves a real client.

The wheel is built from a copy of the files git tracks (not the editable tree, whose
``services/`` holds protobuf code generated in place), so the generated ``groupcoord.rpc`` and
``groupcoord.records`` must come from the build itself. ``HOME`` points below a file, where
nothing can be created even by root: the embedded broker must run without writing there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.embedded_broker import stop_process_group

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
UNWRITABLE_HOME = "/dev/null/home"  # below a file: not even root can create it


def repository_copy(dest: Path) -> Path:
    """The files git knows (tracked, and new ones not ignored) copied to ``dest``."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:  # noqa: ANN003
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, **kwargs)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the wheel, as the quick start installs it (the ``local`` extra:
    ``groupcoord up`` runs everything on this machine), and its dependencies; its bin/ folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = repository_copy(tmp / "src")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"), str(source)])
    (wheel,) = (tmp / "dist").glob("groupcoord-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "groupcoord/rpc/v1/shard_control_pb2_grpc.py" in names
    assert "groupcoord/records/v1/consumer_group_pb2.py" in names
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel}[local]"])
    return venv / "bin"


@pytest.fixture
def up(installed: Path, tmp_path: Path) -> Iterator[str]:
    """``groupcoord up`` of the installed wheel, run from outside the repository with an
    unwritable HOME; yields the bootstrap address it prints."""
    env = {
        "PATH": f"{installed}:/usr/bin:/bin",
        "HOME": UNWRITABLE_HOME,
        "TMPDIR": str(tmp_path),
        **{k: v for k, v in os.environ.items() if k.startswith("PIP_")},
    }
    proc = subprocess.Popen(
        [str(installed / "groupcoord"), "up", "--port", "0", "--shards", "1", "--partitions", "4"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "up.log", "wb"),  # noqa: SIM115 - closed with the process
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("groupcoord is up: bootstrap "):
                yield line.split()[4]
                break
        else:
            pytest.fail(f"groupcoord up exited {proc.wait()}:\n{(tmp_path / 'up.log').read_text()[-3000:]}")
    finally:
        stop_process_group(proc)


def test_the_wheel_carries_the_generated_modules_and_runs_without_the_checkout(installed: Path) -> None:
    probe = run(
        [
            str(installed / "python"),
            "-c",
            "import groupcoord, groupcoord.rpc.v1.shard_control_pb2, groupcoord.records.v1.consumer_group_pb2;"
            "print(groupcoord.__file__)",
        ],
        cwd="/",
    )
    assert str(installed.parent) in probe.stdout
    assert run([str(installed / "groupcoord"), "--help"], cwd="/").stdout.startswith("usage: groupcoord")


def test_groupcoord_up_from_the_wheel_serves_a_confluent_kafka_consumer(up: str) -> None:
    topic, group = f"wheel-{uuid.uuid4().hex[:6]}", f"wheel-group-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": up})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)
    producer = Producer({"bootstrap.servers": up})
    for i in range(5):
        producer.produce(topic, f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": up,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        seen = []
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
            if len(seen) == 5:
                break
        assert seen == [f"r{i}".encode() for i in range(5)]
        committed = consumer.commit(asynchronous=False)
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, 5)]
        (read_back,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        assert read_back.offset == 5
    finally:
        consumer.close()
