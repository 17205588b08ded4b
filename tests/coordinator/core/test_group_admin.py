"""ListGroups, DescribeGroups, DeleteGroups and dynamic group configs."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as E
from shard_test_context import ShardContext

from groupcoord.rpc.v1 import group_admin_pb2 as pb


def _list(ctx: ShardContext, states: list[str] = (), types: list[str] = ()) -> list[tuple[str, str, str]]:
    request = pb.ListGroupsRequest(api_version=5, states_filter=states, types_filter=types)
    response = ctx.answer(ctx.call("list_groups", request)[0])
    return sorted((g.group_id, g.group_state, g.group_type) for g in response.groups)


def test_list_groups_with_state_and_type_filters() -> None:
    ctx = ShardContext()
    ctx.form_group("stable", 1)
    ctx.commit("simple", {("t", 0): 1})
    ctx.join_dynamic("preparing")
    assert _list(ctx) == [
        ("preparing", "PreparingRebalance", "classic"),
        ("simple", "Empty", "classic"),
        ("stable", "Stable", "classic"),
    ]
    assert _list(ctx, states=["stable", "EMPTY"]) == [
        ("simple", "Empty", "classic"),
        ("stable", "Stable", "classic"),
    ]
    assert _list(ctx, types=["Consumer"]) == []
    assert len(_list(ctx, types=["classic"])) == 3


def test_describe_groups() -> None:
    ctx = ShardContext()
    ids, gen = ctx.form_group("g", 2)
    ctx.join_dynamic("rebalancing")
    request = pb.DescribeGroupsRequest(api_version=6, groups=["g", "rebalancing", "missing"])
    g, rebalancing, missing = ctx.answer(ctx.call("describe_groups", request)[0]).groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert [m.member_id for m in g.members] == ids
    assert [m.member_assignment for m in g.members] == [m.encode() for m in ids]
    assert g.authorized_operations == -(2**31)
    assert rebalancing.group_state == "PreparingRebalance" and rebalancing.protocol_data == ""
    assert all(m.member_assignment == b"" for m in rebalancing.members)
    assert (missing.error_code, missing.group_state) == (E.group_id_not_found.value, "Dead")
    old = ctx.answer(
        ctx.call("describe_groups", pb.DescribeGroupsRequest(api_version=5, groups=["missing"]))[0]
    )
    assert (old.groups[0].error_code, old.groups[0].group_state) == (0, "Dead")


def test_delete_groups() -> None:
    ctx = ShardContext()
    ctx.form_group("busy", 1)
    ctx.commit("idle", {("t", 0): 1})
    request = pb.DeleteGroupsRequest(api_version=2, groups_names=["busy", "idle", "missing", ""])
    results = ctx.answer(ctx.call("delete_groups", request)[0]).results
    assert [(r.group_id, r.error_code) for r in results] == [
        ("busy", E.non_empty_group.value),
        ("idle", 0),
        ("missing", E.group_id_not_found.value),
        ("", E.group_id_not_found.value),  # Kafka 4.4's answer to an empty name
    ]
    assert "idle" not in ctx.shard.groups
    assert ctx.fetch("idle") == {}
    ctx.assert_replay_equals_live()


def _configs(ctx: ShardContext, group: str) -> dict[str, tuple[str, int]]:
    request = pb.DescribeGroupConfigsRequest(api_version=4, group_id=group)
    response = ctx.answer(ctx.call("describe_group_configs", request)[0])
    return {c.name: (c.value, c.config_source) for c in response.configs}


def _alter(ctx: ShardContext, group: str, *changes: tuple[str, int, str | None], validate_only: bool = False):
    request = pb.AlterGroupConfigsRequest(api_version=1, group_id=group, validate_only=validate_only)
    for name, op, value in changes:
        c = request.configs.add(name=name, config_operation=op)
        if value is not None:
            c.value = value
    return ctx.answer(ctx.call("alter_group_configs", request)[0])


def test_group_configs_are_validated_against_broker_bounds() -> None:
    ctx = ShardContext()
    assert _configs(ctx, "g")["consumer.session.timeout.ms"] == ("45000", 5)
    assert _alter(ctx, "g", ("consumer.session.timeout.ms", 0, "50000")).error_code == 0
    assert _configs(ctx, "g")["consumer.session.timeout.ms"] == ("50000", 8)
    assert ctx.shard.config_manager.session_timeout_ms("g") == 50_000
    bad = _alter(ctx, "g", ("consumer.heartbeat.interval.ms", 0, "100"))
    assert bad.error_code == E.invalid_config.value and "range" in bad.error_message
    assert _alter(ctx, "g", ("unknown.config", 0, "1")).error_code == E.invalid_config.value
    assert _alter(ctx, "g", ("consumer.assignment.interval.ms", 2, "1")).error_code == E.invalid_config.value
    assert (
        _alter(ctx, "g", ("consumer.assignment.interval.ms", 0, "1000"), validate_only=True).error_code == 0
    )
    assert ctx.shard.config_manager.assignment_interval_ms("g") == 0
    assert _alter(ctx, "g", ("consumer.session.timeout.ms", 1, None)).error_code == 0
    assert _configs(ctx, "g")["consumer.session.timeout.ms"] == ("45000", 5)
    ctx.assert_replay_equals_live()


def test_describe_groups_shows_a_consumer_group_in_the_embedded_protocol() -> None:
    """Tools still on DescribeGroups see KIP-848 groups as Kafka shows them: protocol type
    "consumer", the default assignor as protocol, subscriptions and assignments encoded."""
    from consumer_group_context import ConsumerGroupContext

    from groupcoord.coordinator.core.classic.consumer_protocol import decode_assignment, decode_subscription

    ctx = ConsumerGroupContext()
    ctx.set_topics(foo=2)
    ctx.join("m1", names=["foo"], instance_id="i1")
    ctx.ack("m1")
    request = pb.DescribeGroupsRequest(api_version=5, groups=["group"])
    (described,) = ctx.answer(ctx.call("describe_groups", request)[0]).groups
    assert (described.error_code, described.protocol_type) == (0, "consumer")
    assert described.protocol_data == ctx.shard.consumer.default_assignor
    assert described.group_state == ctx.shard.groups["group"].state_name()
    (member,) = described.members
    assert (member.member_id, member.group_instance_id) == ("m1", "i1")
    assert decode_subscription(member.member_metadata).topics == ["foo"]
    assert decode_assignment(member.member_assignment).partitions == {"foo": [0, 1]}
    listed = _list(ctx, types=["consumer"])
    assert listed == [("group", described.group_state, "consumer")]
