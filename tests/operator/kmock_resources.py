"""The resources the emulated API server (kmock) serves to the real kopf operator.

One list for the operator's kmock tests and the deployment test (tests/deploy, which loads this
file by path): what the operator reads and writes, with the GroupCoordinator's status and scale
subresources as the CRD declares them.
"""

from __future__ import annotations

from typing import Any

import kmock


def declare_resources(k: Any) -> None:
    """What the emulator's discovery serves; kopf waits for namespaces and CRDs before watching."""
    info = kmock.ResourceInfo
    k.resources["v1/namespaces"] = info(kind="Namespace", namespaced=False, verbs={"list", "watch", "get"})
    k.resources["apiextensions.k8s.io/v1/customresourcedefinitions"] = info(
        kind="CustomResourceDefinition", namespaced=False, verbs={"list", "watch", "get"}
    )
    k.resources["groupcoord.io/v1alpha1/groupcoordinators"] = info(
        kind="GroupCoordinator",
        singular="groupcoordinator",
        namespaced=True,
        verbs={"list", "watch", "get", "create", "patch", "update"},
        subresources={"status", "scale"},
    )
    for res, kind in [
        ("v1/pods", "Pod"),
        ("v1/services", "Service"),
        ("v1/events", "Event"),
        ("apps/v1/statefulsets", "StatefulSet"),
        ("apps/v1/deployments", "Deployment"),
        ("policy/v1/poddisruptionbudgets", "PodDisruptionBudget"),
        ("coordination.k8s.io/v1/leases", "Lease"),
    ]:
        k.resources[res] = info(kind=kind, namespaced=True, verbs={"list", "watch", "get", "create", "patch"})
