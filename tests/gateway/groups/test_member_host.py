"""A member's host as Kafka's coordinator records it: Java's ``InetAddress.toString()`` of the
client's address, which DescribeGroups and ConsumerGroupDescribe return and
``kafka-consumer-groups.sh`` prints in its HOST column ("/127.0.0.1", not "127.0.0.1")."""

from __future__ import annotations

import pytest

from groupcoord.gateway.groups.serving import java_inet_address


@pytest.mark.parametrize(
    ("peer", "printed"),
    [
        ("127.0.0.1", "/127.0.0.1"),
        ("10.1.2.3", "/10.1.2.3"),
        # Java prints IPv6 uncompressed, without leading zeros, lower case
        ("::1", "/0:0:0:0:0:0:0:1"),
        ("2001:DB8::0a:1", "/2001:db8:0:0:0:0:a:1"),
        ("fe80::1%eth0", "/fe80:0:0:0:0:0:0:1%eth0"),
        # an IPv4-mapped address is an Inet4Address in Java
        ("::ffff:192.168.0.7", "/192.168.0.7"),
    ],
)
def test_member_host_is_java_inet_address_to_string(peer: str, printed: str) -> None:
    assert java_inet_address(peer) == printed
