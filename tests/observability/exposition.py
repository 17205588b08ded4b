"""Reading what a registry exports, as Prometheus would see it (helpers for these tests)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    """One sample's value, or None when the series does not exist."""
    return registry.get_sample_value(name, labels)


def exposition(registry: CollectorRegistry) -> str:
    """The text a scrape of ``registry`` returns."""
    return generate_latest(registry).decode()
