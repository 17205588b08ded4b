"""ACL settings beyond the file's JSON: a YAML file, --allow-everyone-if-no-acl-found (and its
environment variable) under the file and the upstream sources, and the upstream source against
the embedded broker end to end (tansu answers DescribeAcls with no ACLs)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcoord.authorization import acl_file
from groupcoord.authorization.acls import Operation, ResourceType
from groupcoord.embedded_broker import EmbeddedBroker

YAML = """
superUsers: [User:admin]
acls:
  - {principal: "User:alice", operation: READ, resourceType: GROUP, resourceName: app-, patternType: PREFIXED}
  - principal: User:alice
    operation: READ
    permissionType: DENY
    resourceType: GROUP
    resourceName: app-secret
"""


def settings(argv: list[str], environ: dict[str, str] | None = None):  # noqa: ANN201
    parser = argparse.ArgumentParser()
    acl_file.add_arguments(parser)
    return acl_file.from_arguments(parser.parse_args(argv), environ or {})


def test_a_yaml_acl_file(tmp_path: Path) -> None:
    path = tmp_path / "acls.yaml"
    path.write_text(YAML)
    policy = settings(["--acl-file", str(path)])()
    assert policy.authorize("User:alice", "h", Operation.READ, ResourceType.GROUP, "app-1")
    assert not policy.authorize("User:alice", "h", Operation.READ, ResourceType.GROUP, "app-secret")
    assert policy.authorize("User:admin", "h", Operation.DELETE, ResourceType.GROUP, "app-secret")
    path.write_text("acls: [{principal: nobody}]\n")
    with pytest.raises(SystemExit, match="authorization: "):
        settings(["--acl-file", str(path)])


def test_allow_everyone_if_no_acl_found(tmp_path: Path) -> None:
    path = tmp_path / "acls.json"
    path.write_text(
        '{"acls": [{"principal": "User:alice", "operation": "READ", "resourceType": "GROUP", "resourceName": "g"}]}'
    )
    for argv, env, expected in (
        (["--acl-file", str(path)], {}, False),  # Kafka's default
        (["--acl-file", str(path), "--allow-everyone-if-no-acl-found"], {}, True),
        (["--acl-file", str(path)], {"GROUPCOORD_ALLOW_EVERYONE_IF_NO_ACL_FOUND": "true"}, True),
    ):
        policy = settings(argv, env)()
        assert policy.authorize("User:bob", "h", Operation.READ, ResourceType.GROUP, "h") is expected
        assert not policy.authorize("User:bob", "h", Operation.READ, ResourceType.GROUP, "g")  # g has an ACL
    path.write_text('{"allowEveryoneIfNoAclFound": false, "acls": []}')  # the file's own value wins
    assert not settings(
        ["--acl-file", str(path), "--allow-everyone-if-no-acl-found"]
    )().allow_everyone_if_no_acl_found
    upstream = settings(["--acl-source", "upstream", "--allow-everyone-if-no-acl-found"])
    assert upstream.allow_everyone_if_no_acl_found


@contextlib.contextmanager
def groupcoord_up(broker: EmbeddedBroker, tmp_path: Path, *flags: str) -> Iterator[str]:
    """``groupcoord up FLAGS`` in front of the session broker, on a state topic of its own."""
    log = open(tmp_path / "up.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "groupcoord.cli", "up", "--kafka", broker.bootstrap, "--port", "0",
         "--shards", "1", "--partitions", "4", *flags, "--state-topic", f"__acl_up_{uuid.uuid4().hex[:8]}",
         "--metric-samples-interval", "0", "--lag-interval", "0"],
        stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
        env=os.environ | {"GROUPCOORD_STATE_DIR": str(tmp_path)},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        bootstrap = None
        for line in proc.stdout:
            if line.startswith("groupcoord is up: bootstrap "):
                bootstrap = line.split()[4]
                break
        assert bootstrap, (tmp_path / "up.log").read_text()[-3000:]
        yield bootstrap
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.mark.broker
@pytest.mark.parametrize("everyone", [False, True], ids=["default-deny", "allow-everyone"])
def test_upstream_acls_of_tansu_end_to_end(broker: EmbeddedBroker, tmp_path: Path, everyone: bool) -> None:
    """--acl-source upstream in front of tansu, whose DescribeAcls holds no ACLs: a consumer is
    refused by default and consumes with --allow-everyone-if-no-acl-found."""
    from confluent_kafka import Consumer, KafkaError, Producer  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    flags = ["--acl-source", "upstream", *(["--allow-everyone-if-no-acl-found"] if everyone else [])]
    with groupcoord_up(broker, tmp_path, *flags) as bootstrap:
        topic = f"acl-up-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(3):
            producer.produce(topic, b"%d" % i)
        assert producer.flush(30) == 0
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "app-1", "auto.offset.reset": "earliest"}
        )
        seen, refused = 0, False
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 30
            while seen < 3 and not refused and time.monotonic() < deadline:
                message = consumer.poll(0.3)
                if message is None:
                    continue
                if message.error() is not None:
                    refused = message.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
                else:
                    seen += 1
        finally:
            consumer.close()
        assert (seen, refused) == ((3, False) if everyone else (0, True))
