"""Server-side assignor plugins, installed as a package would install them: a distribution on
the shard's path declaring a ``groupcoord.consumer_assignors`` entry point is usable by the
name it declares, through the shard the worker builds, by a member naming it as its
``group.remote.assignor``; a name nobody installed stops the worker with one line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from groupcoord.coordinator.server import assignor_plugins
from groupcoord.coordinator.server.assignor_plugins import UnknownAssignor, consumer_assignors
from groupcoord.coordinator.server.coordinator_service import check_consumer_assignors, group_shard_factory
from groupcoord.rpc.v1 import consumer_group_pb2 as pb

PLUGIN = '''
class EverythingToOne:
    """Every subscribed partition to the member whose id sorts first."""

    name = "everything-to-one"

    def assign(self, group, topics):
        first = min(group.members)
        out = {m: {} for m in group.members}
        for m, spec in group.members.items():
            for tid in spec.subscribed_topic_ids:
                topic = topics.topic(tid)
                if topic is not None:
                    out[first][tid] = list(range(topic.num_partitions))
        return out
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin package and its dist-info, as ``pip install`` leaves them in site-packages."""
    (tmp_path / "everything_to_one.py").write_text(PLUGIN)
    dist = tmp_path / "everything_to_one-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: everything-to-one\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [groupcoord.consumer_assignors]
            everything-to-one = everything_to_one:EverythingToOne
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assignor_plugins.installed_plugins.cache_clear()
    yield
    assignor_plugins.installed_plugins.cache_clear()
    sys.modules.pop("everything_to_one", None)


class Armed:
    def is_scheduled(self, key: str) -> bool:
        return False


def test_an_installed_plugin_serves_the_members_that_name_it(installed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from groupcoord.coordinator.core.topics_image import TopicImage, TopicsImage  # noqa: PLC0415

    monkeypatch.setenv("GROUPCOORD_GROUP_CONSUMER_GROUP_ASSIGNORS", "uniform,everything-to-one")
    shard = group_shard_factory(0, Armed())
    assert list(shard.consumer.assignors) == ["uniform", "everything-to-one"]
    image = TopicsImage.of([TopicImage(b"\x01" * 16, "foo", 3, ())])
    for record in shard.on_metadata_update(image, 0).records:
        shard.replay(record)

    def join(member: str) -> pb.ConsumerGroupHeartbeatResponse:
        request = pb.ConsumerGroupHeartbeatRequest(
            api_version=1, group_id="g", member_id=member, member_epoch=0, rebalance_timeout_ms=30000,
            server_assignor="everything-to-one",
        )
        request.subscribed_topic_names.SetInParent()
        request.subscribed_topic_names.names.append("foo")
        request.topic_partitions.SetInParent()
        result = shard.consumer_group_heartbeat(request, 0)
        for record in result.records:
            shard.replay(record)
        return result.response

    first = join("a")
    assert first.error_code == 0
    assert [list(t.partitions) for t in first.assignment.topic_partitions] == [[0, 1, 2]]
    assert join("b").assignment.topic_partitions == [], "the plugin gave everything to a"


def test_a_name_nobody_installed_is_refused_in_one_line(installed: None) -> None:
    with pytest.raises(UnknownAssignor) as refused:
        consumer_assignors(("uniform", "sticky-by-rack"))
    message = str(refused.value)
    assert "\n" not in message and "'sticky-by-rack'" in message
    assert "available: everything-to-one, range, uniform" in message


def test_the_shard_command_configured_with_an_unknown_assignor_stops_before_its_workers_start(
    installed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUPCOORD_GROUP_CONSUMER_GROUP_ASSIGNORS", "uniform,sticky-by-rack")
    with pytest.raises(SystemExit) as stopped:
        check_consumer_assignors()
    assert str(stopped.value.code).startswith("groupcoord shard: consumer group assignor 'sticky-by-rack'")
    monkeypatch.setenv("GROUPCOORD_GROUP_CONSUMER_GROUP_ASSIGNORS", "everything-to-one")
    check_consumer_assignors()


def test_groupcoord_up_with_an_unknown_assignor_says_so_in_one_line_and_starts_nothing() -> None:
    """As a user meets it: the command, its exit status and its one line."""
    env = {**os.environ, "GROUPCOORD_GROUP_CONSUMER_GROUP_ASSIGNORS": "uniform,nope"}
    done = subprocess.run(
        [sys.executable, "-m", "groupcoord.cli", "up", "--port", "0"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "groupcoord up: consumer group assignor 'nope' is neither built in nor installed as a "
        "'groupcoord.consumer_assignors' entry point (available: range, uniform)"
    ]


def test_a_built_in_name_stays_ours_and_an_assignor_without_assign_is_refused() -> None:
    class NoAssign:
        name = "no-assign"

    plugins = {"uniform": lambda: NoAssign, "no-assign": lambda: NoAssign}
    assert type(consumer_assignors(("uniform",), plugins)["uniform"]).__name__ == "UniformAssignor"
    with pytest.raises(UnknownAssignor, match="no assign"):
        consumer_assignors(("no-assign",), plugins)
