"""KIP-848 online migration: conversions between classic and consumer groups both ways, and the
classic members served inside a consumer group."""
