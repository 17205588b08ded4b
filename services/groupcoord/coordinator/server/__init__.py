"""A shard process: the supervisor, its worker processes, and their gRPC services."""
