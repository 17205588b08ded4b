"""KIP-848 consumer groups: the group and its records, ConsumerGroupHeartbeat, target assignment,
reconciliation, regex subscriptions and ConsumerGroupDescribe."""
