"""Prometheus metrics (:mod:`.shard_metrics`, :mod:`.gateway_metrics`, served by
:mod:`.metrics_endpoint`) and the metric samples shards publish to the metrics topic
(:mod:`.metric_samples`) for the Spark capacity job."""
