"""HTTP/2 keepalive between the gateway and the shards, so a peer gone silent is noticed in
seconds, not minutes.

The gateway's calls to a shard share a few long-lived streams. A shard cut off the network (a
partition, a node gone) sends no FIN and no RST: the connection stays established, the kernel
retransmits with a timeout that doubles up to two minutes, and every call on the stream times
out one after the other, even after the shard is reachable again and leads partitions again,
until the next retransmission happens to get through. Kafka's clients close a connection whose
request timed out; gRPC's keepalive closes it sooner and without a call in flight: a PING not
answered in :data:`PING_TIMEOUT_MS` closes the connection (gRPC 1.85 times a keepalive ping
out by ``grpc.http2.ping_timeout_ms``, a minute unless set, not by ``keepalive_timeout_ms``), its streams fail their calls
COORDINATOR_NOT_AVAILABLE (retriable) and the next call opens a new one. The server must accept
pings this often, or it would answer them with GOAWAY (too_many_pings).
"""

from __future__ import annotations

PING_INTERVAL_MS = 10_000
PING_TIMEOUT_MS = 5_000

#: a channel's options: ping every PING_INTERVAL_MS, with or without calls and data
CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", PING_INTERVAL_MS),
    ("grpc.keepalive_timeout_ms", PING_TIMEOUT_MS),
    ("grpc.http2.ping_timeout_ms", PING_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)

#: a server's options: accept those pings (half the interval leaves room for timer jitter)
SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", PING_INTERVAL_MS // 2),
)
