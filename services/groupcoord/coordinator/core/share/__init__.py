"""KIP-932 share groups, one concept per module: the delivery state of a share-partition —
records acquired under locks, acknowledged, released, archived — with its snapshot record
(share_partition.py); the share group, its members and their records (group.py);
ShareGroupHeartbeat and the session timer (heartbeat.py). The assignor is
``assignors/simple_assignor.py``. The shard does not replay these records yet and nothing
routes a share-group request here: see docs/share-groups.md."""
