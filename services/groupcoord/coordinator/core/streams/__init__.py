"""Streams groups (KIP-1071): Kafka Streams' tasks assigned by the coordinator.

A fourth group type, in a folder of its own as the others are: the topology against the
cluster's topics (:mod:`.topology`: each subtopology's tasks, the internal topics to create and
their sizes, the heartbeat's statuses while the topology is not ready), the sticky task assignor
(:mod:`.task_assignor`), a member's reconciliation towards its target (:mod:`.reconciliation`),
the group, its records (type ids 80-85) and their replay (:mod:`.streams_group`), and the two
APIs: StreamsGroupHeartbeat (:mod:`.streams_heartbeat`, key 88) and StreamsGroupDescribe
(:mod:`.streams_describe`, key 89), reached through :mod:`.streams_context`.
"""
