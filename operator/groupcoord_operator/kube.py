"""Dict-in, dict-out access to the API server for the operator's reconcile.

The operator deals in plain dicts (what the ``build_*`` functions return and what the CRD
describes), sent over :mod:`groupcoord.common.kubernetes_api` (configuration, authentication,
TLS as client-go does them). Patches are JSON merge patches (RFC 7386): the operator owns every
field it writes.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Mapping
from typing import Any

from groupcoord.common.kubernetes_api import KubernetesApi, KubernetesConfigError
from groupcoord_operator.crd import GROUP, PLURAL, VERSION

MERGE_PATCH = "application/merge-patch+json"

# kind → (api prefix, plural); enough for the objects the operator touches
_PATHS: dict[str, tuple[str, str]] = {
    "StatefulSet": ("/apis/apps/v1", "statefulsets"),
    "Deployment": ("/apis/apps/v1", "deployments"),
    "Service": ("/api/v1", "services"),
    "Pod": ("/api/v1", "pods"),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets"),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies"),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases"),
    "GroupCoordinator": (f"/apis/{GROUP}/{VERSION}", PLURAL),
}


class KubeError(RuntimeError):
    """A non-2xx answer; ``status`` lets callers tell 404/409 from real failures."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def collection_path(kind: str, namespace: str) -> str:
    prefix, plural = _PATHS[kind]
    return f"{prefix}/namespaces/{namespace}/{plural}"


def object_path(kind: str, namespace: str, name: str) -> str:
    return f"{collection_path(kind, namespace)}/{name}"


class Kube:
    """Synchronous dict-in, dict-out access to the API server (kopf runs sync handlers in threads)."""

    def __init__(self, api: KubernetesApi) -> None:
        self.api = api

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        try:
            status, data = self.api.request(method, path, query or [], body, content_type, timeout=30)
        except (OSError, http.client.HTTPException, KubernetesConfigError) as exc:
            # the API server unreachable for a moment (an upgrade, a network blip): a failed call
            # like any other, which the elector and the reconcile retry, never a dead thread
            raise KubeError(0, f"API server unreachable: {exc}") from exc
        if not 200 <= status < 300:
            raise KubeError(status, data.decode(errors="replace")[:500] if data else "")
        return json.loads(data) if data else {}

    def get(self, path: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return self._call("GET", path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, path: str, label_selector: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        query = []
        if label_selector:
            query.append(("labelSelector", ",".join(f"{k}={v}" for k, v in sorted(label_selector.items()))))
        items = self._call("GET", path, query=query).get("items") or []
        # filter here too: cheap, and correct even where a server ignores the selector
        wanted = dict(label_selector or {})
        return [
            item
            for item in items
            if all(((item.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]

    def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._call("POST", path, body=dict(body))

    def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT: with ``metadata.resourceVersion`` set, a concurrent change fails with 409."""
        return self._call("PUT", path, body=dict(body))

    def merge_patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._call("PATCH", path, body=dict(body), content_type=MERGE_PATCH)

    def delete(self, path: str) -> None:
        """Delete the object; one already gone is no error."""
        try:
            self._call("DELETE", path)
        except KubeError as exc:
            if exc.status != 404:
                raise
