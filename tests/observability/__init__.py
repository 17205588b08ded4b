"""Tests of the Prometheus metrics and the metric samples published to the metrics topic."""
