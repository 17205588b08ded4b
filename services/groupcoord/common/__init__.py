"""What every service shares and nothing else: how a group maps to a state-topic partition
and a worker, Kafka's error codes and wire format (:mod:`.kafka_wire`), the group APIs the
gateway and the shards serve together (:mod:`.group_api_declarations`), and the event loop
every process runs on. The gateway, the shards and the control plane import this package,
never each other's internals."""
