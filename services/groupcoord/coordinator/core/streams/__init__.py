"""Streams groups (KIP-1071): Kafka Streams' tasks assigned by the coordinator.

A fourth group type, in a folder of its own as the others are. What is here so far: the
sticky task assignor (:mod:`.task_assignor`), a pure function from the group's members and its
topology's subtopologies to each member's active and standby tasks. The membership, topology,
records, heartbeat and the gateway's declarations of StreamsGroupHeartbeat (key 88) and
StreamsGroupDescribe (key 89) come next (issue 43); until then no client can form a streams
group through the gateway, and ApiVersions does not offer those keys.
"""
