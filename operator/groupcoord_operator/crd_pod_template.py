"""The CRD schema of ``spec.template``: a Strimzi-style pod template for each component.

Apart from :mod:`.crd` because it is Kubernetes' own vocabulary (resources, affinity,
tolerations, probes, disruption budgets) rather than groupcoord's, and the longest part of
the schema.
"""

from __future__ import annotations

from typing import Any

TOLERATION_OPERATORS = ["Exists", "Equal"]
TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]


def integer(description: str, minimum: int, maximum: int | None = None, default: int | None = None) -> dict:
    schema: dict[str, Any] = {"type": "integer", "minimum": minimum, "description": description}
    if maximum is not None:
        schema["maximum"] = maximum
    if default is not None:
        schema["default"] = default
    return schema


def resource_requirements(description: str) -> dict:
    quantity = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
    }
    return {
        "type": "object",
        "description": description,
        "properties": {
            "requests": {"type": "object", "additionalProperties": quantity, "description": "Requests."},
            "limits": {"type": "object", "additionalProperties": quantity, "description": "Limits."},
        },
    }


def string_map(description: str) -> dict:
    return {"type": "object", "additionalProperties": {"type": "string"}, "description": description}


def quantity(description: str) -> dict:
    return {
        **resource_requirements("")["properties"]["requests"]["additionalProperties"],
        "description": description,
    }


def pod_template(component: str) -> dict:
    """Strimzi's ``template.pod``: what a platform team sets on the pods of one component.

    Kubernetes' own types are described as far as a structural schema needs; ``affinity`` and a
    spread constraint's ``labelSelector`` keep their (large) Kubernetes shape unchecked here and
    are validated by the API server when the operator writes the workload — a rejection is
    reported in the resource's Degraded condition and changes nothing that runs.
    """
    kubernetes_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "type": "object",
        "description": f"Overrides for the {component} pods (Strimzi's template.pod).",
        "properties": {
            "metadata": {
                "type": "object",
                "description": "Extra labels and annotations on the pods (the operator's own labels win).",
                "properties": {
                    "labels": string_map("Extra pod labels."),
                    "annotations": string_map("Extra pod annotations."),
                },
            },
            "affinity": {**kubernetes_object, "description": "Pod affinity (core/v1 Affinity)."},
            "tolerations": {
                "type": "array",
                "description": "Pod tolerations (core/v1 Toleration).",
                "items": {
                    "type": "object",
                    "properties": {
                        "key": {"type": "string", "description": "Taint key."},
                        "operator": {
                            "type": "string",
                            "enum": TOLERATION_OPERATORS,
                            "description": "Exists or Equal.",
                        },
                        "value": {"type": "string", "description": "Taint value."},
                        "effect": {"type": "string", "enum": TAINT_EFFECTS, "description": "Taint effect."},
                        "tolerationSeconds": {
                            "type": "integer",
                            "description": "For NoExecute: seconds to stay.",
                        },
                    },
                },
            },
            "topologySpreadConstraints": {
                "type": "array",
                "description": "Pod topology spread constraints (core/v1 TopologySpreadConstraint); labelSelector defaults to the component's pods.",
                "items": {
                    "type": "object",
                    "required": ["maxSkew", "topologyKey", "whenUnsatisfiable"],
                    "properties": {
                        "maxSkew": integer("Largest allowed difference of pod counts between domains.", 1),
                        "topologyKey": {
                            "type": "string",
                            "minLength": 1,
                            "description": "Node label of the domain.",
                        },
                        "whenUnsatisfiable": {
                            "type": "string",
                            "enum": ["DoNotSchedule", "ScheduleAnyway"],
                            "description": "What to do when the skew cannot be kept.",
                        },
                        "minDomains": integer("Minimum number of eligible domains.", 1),
                        "labelSelector": {
                            **kubernetes_object,
                            "description": "Pods counted (default: this component's pods).",
                        },
                        "matchLabelKeys": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "Pod label keys to group by.",
                        },
                        "nodeAffinityPolicy": {
                            "type": "string",
                            "enum": ["Honor", "Ignore"],
                            "description": "Honor or Ignore.",
                        },
                        "nodeTaintsPolicy": {
                            "type": "string",
                            "enum": ["Honor", "Ignore"],
                            "description": "Honor or Ignore.",
                        },
                    },
                },
            },
            "nodeSelector": string_map("Node selector."),
            "priorityClassName": {"type": "string", "description": "PriorityClass of the pods."},
            "securityContext": {
                **kubernetes_object,
                "description": "Pod security context (core/v1 PodSecurityContext), merged over the "
                "operator's (runAsNonRoot, RuntimeDefault seccomp): e.g. fsGroup, runAsUser.",
            },
            "containerSecurityContext": {
                **kubernetes_object,
                "description": "Container security context (core/v1 SecurityContext), merged over the "
                "operator's (read-only root, no privilege escalation, all capabilities dropped).",
            },
            "env": {
                "type": "array",
                "description": "Extra environment variables of the container (Strimzi's "
                "template.container.env); the operator's own variables win.",
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "description": "Variable name."},
                        "value": {"type": "string", "description": "Value."},
                        "valueFrom": {**kubernetes_object, "description": "Source (core/v1 EnvVarSource)."},
                    },
                },
            },
            "livenessProbe": probe_timing("liveness"),
            "readinessProbe": probe_timing("readiness"),
            "podDisruptionBudget": {
                "type": "object",
                "description": "The component's PodDisruptionBudget (Strimzi's template.podDisruptionBudget).",
                "properties": {
                    "maxUnavailable": integer(
                        "Pods that may be down at once for voluntary disruptions (0: none; default 1).", 0
                    ),
                },
            },
        },
    }


def probe_timing(kind: str) -> dict:
    """Strimzi's probe settings: timings only; what a probe checks is the operator's."""
    return {
        "type": "object",
        "description": f"Timings of the {kind} probe (what it checks stays the operator's).",
        "properties": {
            "initialDelaySeconds": integer("Seconds before the first probe.", 0),
            "periodSeconds": integer("Seconds between probes.", 1),
            "timeoutSeconds": integer("Seconds a probe may take.", 1),
            "failureThreshold": integer("Failures in a row that count.", 1),
        },
    }
