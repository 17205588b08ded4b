"""``--extra-listeners``: what the operator writes for Strimzi's listeners[] beyond the first,
read and checked before anything listens (a bad entry ends the command with one line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from groupcoord.gateway.assembly import GatewayOptions
from groupcoord.gateway.extra_listeners import ExtraListenersError, parse_extra_listeners

BOOTSTRAP = GatewayOptions(("kafka", 9092), port=9092, broker_ports=3, advertised_host="10.0.0.7")


def test_a_listener_takes_the_bootstrap_listeners_settings_it_does_not_give(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"alice": "secret"}))
    text = json.dumps(
        [
            {"name": "secure", "port": 9192, "security": {"sasl": "credentials", "sasl_credentials": str(users),
                                                          "sasl_mechanisms": ["SCRAM-SHA-512"]}},
            {"name": "external", "port": 9292, "brokerPorts": 1, "advertisedHostEnv": "EXTERNAL_HOST"},
        ]
    )  # fmt: skip
    secure, external = parse_extra_listeners(text, BOOTSTRAP, {"EXTERNAL_HOST": "203.0.113.9"})
    options = secure.options(BOOTSTRAP)
    assert (options.port, options.broker_ports, options.advertised_host) == (9192, 3, "10.0.0.7")
    assert options.listener_security.sasl == "credentials"
    assert options.listener_security.sasl_mechanisms == ("SCRAM-SHA-512",)
    assert options.upstream == BOOTSTRAP.upstream, "every listener fronts the same upstream"
    options = external.options(BOOTSTRAP)
    assert (options.port, options.broker_ports, options.advertised_host) == (9292, 1, "203.0.113.9")
    assert options.listener_security.sasl == "none"
    assert parse_extra_listeners("", BOOTSTRAP) == parse_extra_listeners(None, BOOTSTRAP) == ()


@pytest.mark.parametrize(
    ("listeners", "message"),
    [
        ({"name": "a", "port": 9192}, "a JSON list"),
        ([{"name": "a", "port": 9192}, {"name": "a", "port": 9292}], "unique"),
        ([{"name": "a", "port": 9094}], "'bootstrap' and 'a' both want port 9094"),
        ([{"name": "a", "port": 9192}, {"name": "b", "port": 9190}], "'a' and 'b' both want port 9192"),
        ([{"name": "a", "port": 9192, "tls": True}], "unknown keys"),
        ([{"name": "a", "port": 9192, "security": {"ssl.keystore": "x"}}], "security takes the keys"),
        ([{"name": "a", "port": 9192, "security": {"sasl": "credentials"}}], "needs"),
        ([{"name": "a", "port": 9192, "security": {"ssl_certfile": "/nonexistent"}}], "certificate and its key"),
        ([{"name": "a", "port": 9192, "advertisedHostEnv": "UNSET_HOST"}], "UNSET_HOST is not set"),
        ([{"name": "a", "port": "9192"}], "port must be a number"),
        ([{"port": 9192}], "needs a name"),
    ],
)
def test_listeners_that_cannot_be_served_are_refused(listeners: object, message: str) -> None:
    with pytest.raises(ExtraListenersError, match=message):
        parse_extra_listeners(json.dumps(listeners), BOOTSTRAP, {})


def test_the_command_ends_with_one_line_on_a_bad_listener() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "groupcoord.cli", "gateway", "--kafka", "127.0.0.1:1", "--port", "0"],
        env={"GROUPCOORD_EXTRA_LISTENERS": '[{"name": "x", "port": 0}, {"name": "x", "port": 0}]', "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "--extra-listeners: listener names must be unique: ['x', 'x']"
    ], done.stderr


async def test_the_connection_limits_bound_the_process_not_each_listener() -> None:
    """Kafka's max.connections is the broker's: with one connection allowed, a client holding
    it on the bootstrap listener leaves none for the second listener."""
    import asyncio  # noqa: PLC0415

    from groupcoord.gateway.assembly import build_gateway  # noqa: PLC0415
    from groupcoord.gateway.transport.connection_limits import ConnectionCounter, ConnectionLimits  # noqa: PLC0415

    limits = ConnectionLimits(max_connections=1)
    options = GatewayOptions(("127.0.0.1", 1), port=0, connection_limits=limits)  # no upstream needed
    counter = ConnectionCounter(limits)
    (second,) = parse_extra_listeners('[{"name": "second", "port": 0}]', options, {})
    gateways = [
        await build_gateway(options, connections=counter),
        await build_gateway(second.options(options), connections=counter),
    ]
    try:
        for gateway in gateways:
            await gateway.start()
        held = await asyncio.open_connection(*gateways[0].bootstrap_address)
        await asyncio.sleep(0.2)
        assert counter.total == 1
        reader, writer = await asyncio.open_connection(*gateways[1].bootstrap_address)
        assert await asyncio.wait_for(reader.read(1), 5) == b"", "closed: the process is at its limit"
        writer.close()
        held[1].close()
        await asyncio.sleep(0.2)
        assert counter.total == 0
    finally:
        for gateway in gateways:
            await gateway.stop()
