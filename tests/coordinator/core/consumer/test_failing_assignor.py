"""A server-side assignor that raises (a plugin's bug) fails the assignment of its own group
only, as Kafka's coordinator does: the heartbeat that needed it gets UNKNOWN_SERVER_ERROR,
"Failed to compute a new target assignment for epoch N: ...", nothing of that heartbeat is
written, and a group on another assignor in the same partition goes on."""

from __future__ import annotations

from consumer_group_context import ConsumerGroupContext
from kio.schema.errors import ErrorCode

from groupcoord.coordinator.core.assignors.uniform_assignor import UniformAssignor


class Broken:
    name = "broken"

    def assign(self, group, topics):  # noqa: ANN001, ANN201 - the plugin interface, duck-typed
        raise RuntimeError("the plugin's bug")


def test_a_raising_assignor_fails_only_its_groups_heartbeat() -> None:
    ctx = ConsumerGroupContext(assignors={"uniform": UniformAssignor(), "broken": Broken()})
    ctx.set_topics(foo=4)
    written = len(ctx.log.entries)
    failed = ctx.join("a", group="on-broken", assignor="broken")
    assert failed.error_code == ErrorCode.unknown_server_error.value
    assert failed.error_message == "Failed to compute a new target assignment for epoch 2: the plugin's bug"
    assert len(ctx.log.entries) == written, "nothing of the failed heartbeat is written"
    assert "on-broken" not in ctx.shard.groups

    ok = ctx.join("b", group="on-uniform")
    assert ok.error_code == 0 and ctx.assignment(ok) == {"foo": [0, 1, 2, 3]}
    ctx.assert_replay_equals_live()
