"""Copy the GroupCoordinator spec schema into the chart's values.schema.json (``coordinator``).

Run after changing ``operator/groupcoord_operator/crd.py`` (and regenerate the CRD with
``python -m groupcoord_operator --print-crd > helm/groupcoord/crds/groupcoord.io_groupcoordinators.yaml``);
``tests/helm/test_chart.py`` fails while the two differ. The chart's copy is the strict variant
(unknown keys refused at ``helm install`` time) without the Kubernetes-only extensions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT / "services")]

from groupcoord_operator.crd import spec_schema, strict  # noqa: E402


def without_kubernetes_extensions(node):  # noqa: ANN001, ANN201
    if isinstance(node, dict):
        return {k: without_kubernetes_extensions(v) for k, v in node.items() if not k.startswith("x-kubernetes")}
    if isinstance(node, list):
        return [without_kubernetes_extensions(v) for v in node]
    return node


def main() -> None:
    path = ROOT / "helm" / "groupcoord" / "values.schema.json"
    values = json.loads(path.read_text())
    coordinator = values["properties"]["coordinator"]
    own = {k: coordinator["properties"][k] for k in ("create", "name")}
    spec = strict(spec_schema())
    coordinator["properties"] = {
        **own,
        **{k: without_kubernetes_extensions(v) for k, v in spec["properties"].items()},
    }
    coordinator["required"] = spec["required"]
    path.write_text(json.dumps(values, indent=2) + "\n")


if __name__ == "__main__":
    main()
