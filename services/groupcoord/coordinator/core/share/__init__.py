"""KIP-932 share groups, one concept per module: the delivery state of a share-partition —
records acquired under locks, acknowledged, released, archived — with its snapshot record
(share_partition.py); ShareFetch and ShareAcknowledge on that state (delivery.py); the share
group, its members and their records (share_group.py); ShareGroupHeartbeat and the session timer
(share_heartbeat.py); ShareGroupDescribe (share_describe.py); Describe/Alter/DeleteShareGroupOffsets
(share_offsets.py). The assignor is ``assignors/simple_assignor.py``. Handlers are reached through the
partition's :class:`~groupcoord.coordinator.core.share.share_context.ShareContext` (the group's
configs turned into the values these modules take); the shard replays the share records and
routes the seven share-group APIs here (core/group_operations.py, docs/share-groups.md)."""
