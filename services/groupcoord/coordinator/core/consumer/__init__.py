"""KIP-848 consumer groups, one concept per module: the group and its records (consumer_group.py),
ConsumerGroupHeartbeat (consumer_heartbeat.py), members leaving, being fenced and static membership
(consumer_membership.py), the group epoch and target assignment driving reconciliation (assignment.py,
with target_assignment.py and reconciliation.py), topic metadata changes (metadata.py), regex
subscriptions (regex_subscriptions.py), replay (consumer_replay.py), timer keys (consumer_timers.py) and
ConsumerGroupDescribe (consumer_describe.py). Handlers are functions over the partition's
:class:`~groupcoord.coordinator.core.consumer.consumer_context.ConsumerContext`."""
