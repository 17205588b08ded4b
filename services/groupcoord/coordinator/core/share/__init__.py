"""KIP-932 share groups, one concept per module: the delivery state of a share-partition —
records acquired under locks, acknowledged, released, archived — with its snapshot record
(share_partition.py). The share groups' assignor is ``assignors/simple_assignor.py``.
Membership (ShareGroupHeartbeat) and the shard's replay of these records come next; nothing routes a share-group request here yet."""
