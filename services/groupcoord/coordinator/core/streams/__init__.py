"""Streams groups (KIP-1071): Kafka Streams' tasks assigned by the coordinator.

A fourth group type, in a folder of its own as the others are. What is here so far, pure
functions all: the topology against the cluster's topics (:mod:`.topology`: each
subtopology's tasks, the internal topics to create and their sizes, the heartbeat's statuses
while the topology is not ready), the sticky task assignor (:mod:`.task_assignor`: each
member's active and standby tasks) and a member's reconciliation towards its target
(:mod:`.reconciliation`: revoke first, take a task once released); and the group itself, its
records (type ids 80-85) and their replay (:mod:`.streams_group`). The heartbeat that writes
those records, the shard's replay table, and the gateway's declarations of StreamsGroupHeartbeat
(key 88) and StreamsGroupDescribe (key 89) come next (issue 43); until then no client can form a streams
group through the gateway, and ApiVersions does not offer those keys.
"""
