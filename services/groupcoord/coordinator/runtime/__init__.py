"""The coordinator runtime: per-partition event loops over coordinator shards, the state-topic
writer and loader, epoch fencing, and the partitions one worker process hosts."""
