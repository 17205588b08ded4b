"""Tests of ``groupcoord groups`` (consumer-group administration over the Kafka protocol)."""
