"""One gateway assembly: what ``groupcoord gateway`` and ``groupcoord up`` build, against the
session's real broker, and the flags both commands read the same way."""

from __future__ import annotations

import argparse
import asyncio
import logging

import pytest

from groupcoord.authorization.upstream_acls import UpstreamAcls, UpstreamAclSource
from groupcoord.embedded_broker import EmbeddedBroker
from groupcoord.gateway import assembly, command
from groupcoord.gateway.assembly import GatewayOptions, build_gateway
from groupcoord.gateway.groups.group_apis import GroupApis
from groupcoord.gateway.groups.leadership import LeadershipTable
from groupcoord.gateway.security.listener_security import ListenerSecurity
from groupcoord.local_cluster import add_arguments as add_up_arguments

pytestmark = pytest.mark.broker


async def test_without_leadership_the_gateway_is_a_plain_proxy(broker: EmbeddedBroker) -> None:
    gateway = await build_gateway(GatewayOptions((broker.host, broker.port), port=0))
    await gateway.start()
    try:
        assert gateway.group_handler is None
        assert gateway.served_apis == {}
        assert gateway.metrics is None
    finally:
        await gateway.stop()


async def test_with_leadership_the_group_apis_are_built_before_the_gateway(broker: EmbeddedBroker) -> None:
    table = LeadershipTable(partitions=4)
    source = UpstreamAclSource(allow_everyone_if_no_acl_found=True)
    options = GatewayOptions((broker.host, broker.port), port=0, acl_policy=source, metrics=True)
    gateway = await build_gateway(options, table)
    handler = gateway.group_handler
    assert isinstance(handler, GroupApis)
    assert handler.leadership is table
    assert handler.authorization is not None
    policy = handler.authorization.policy
    assert isinstance(policy, UpstreamAcls)
    assert policy.ask == gateway.upstream.request  # the upstream was built first and asked
    assert gateway.metrics is not None
    assert _acl_refreshers() == 1
    await gateway.start()
    await gateway.stop()
    await asyncio.sleep(0)
    assert _acl_refreshers() == 0, "the ACL refresher the gateway owned stopped with it"


def _acl_refreshers() -> int:
    return sum(
        1 for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "UpstreamAcls.run" and not t.done()
    )


@pytest.mark.parametrize("add, host", [(command.add_arguments, "0.0.0.0"), (add_up_arguments, "127.0.0.1")])
def test_gateway_and_up_read_the_shared_flags_alike(add, host: str) -> None:
    parser = argparse.ArgumentParser()
    add(parser)
    args = parser.parse_args(
        ["--kafka", "kafka:9092", "--port", "19092", "--advertised-host", "gw.example", "--state-topic", "st"]
    )
    assert (args.host, args.port, args.advertised_host, args.state_topic) == (host, 19092, "gw.example", "st")
    options = GatewayOptions.from_arguments(args, args.kafka)
    assert (options.upstream, options.host, options.port) == (("kafka", 9092), host, 19092)
    assert options.bootstrap_servers == (("kafka", 9092),)
    assert options.state_topic == "st"
    assert assembly.parse_address("a:1,b:2") == ("a", 1)
    assert assembly.parse_bootstrap("a:1, b:2,") == (("a", 1), ("b", 2))
    several = parser.parse_args(["--kafka", "k1:9092,k2:9093"])
    assert GatewayOptions.from_arguments(several, several.kafka).bootstrap_servers == (("k1", 9092), ("k2", 9093))


async def test_passthrough_without_a_policy_follows_the_upstreams_acls(
    broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """The client's other requests reach the upstream under its own identity, judged by the
    upstream's ACLs: with no policy of their own the group APIs take the same ones."""
    options = GatewayOptions(
        (broker.host, broker.port), port=0, listener_security=ListenerSecurity(sasl="passthrough")
    )
    with caplog.at_level(logging.INFO, logger="groupcoord.gateway.assembly"):
        gateway = await build_gateway(options, LeadershipTable(partitions=4))
    try:
        handler = gateway.group_handler
        assert isinstance(handler, GroupApis) and handler.authorization is not None
        assert isinstance(handler.authorization.policy, UpstreamAcls)
        assert "follow the upstream cluster's ACLs" in caplog.text
    finally:
        await gateway.stop()
    without = await build_gateway(GatewayOptions((broker.host, broker.port), port=0), LeadershipTable(partitions=4))
    try:
        assert isinstance(without.group_handler, GroupApis) and without.group_handler.authorization is None
    finally:
        await without.stop()


@pytest.mark.parametrize("add", [command.add_arguments, add_up_arguments])
def test_the_shared_upstream_identity_override_is_a_flag_or_the_environment(add) -> None:
    parser = argparse.ArgumentParser()
    add(parser)
    plain = parser.parse_args(["--kafka", "kafka:9092"])
    allowed = parser.parse_args(["--kafka", "kafka:9092", "--allow-shared-upstream-identity"])
    assert not assembly.allow_shared_upstream_identity(plain, {})
    assert assembly.allow_shared_upstream_identity(allowed, {})
    assert assembly.allow_shared_upstream_identity(plain, {assembly.ENV_ALLOW_SHARED_UPSTREAM_IDENTITY: "true"})
