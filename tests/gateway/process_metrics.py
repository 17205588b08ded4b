"""Reading a multi-process gateway's metrics: which process served what."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def requests_by_process(url: str, api: str = "api_versions") -> dict[str, float]:
    """Requests of ``api`` each gateway process served ("0": the first, unlabelled); every
    connection starts with ApiVersions, so by default: connections per process."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    served: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "groupcoord_request_latency_seconds_count" and s.labels.get("api") == api:
                process = s.labels.get("gateway_process", "0")
                served[process] = served.get(process, 0.0) + s.value
    return served
