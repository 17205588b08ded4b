"""KIP-848 consumer groups, one concept per module: the group and its records (group.py),
ConsumerGroupHeartbeat (heartbeat.py), members leaving, being fenced and static membership
(membership.py), the group epoch and target assignment driving reconciliation (assignment.py,
with target_assignment.py and reconciliation.py), topic metadata changes (metadata.py), regex
subscriptions (regex_subscriptions.py), replay (replay.py), timer keys (timers.py) and
ConsumerGroupDescribe (describe.py). Handlers are functions over the partition's
:class:`~groupcoord.coordinator.core.consumer.context.ConsumerContext`."""
