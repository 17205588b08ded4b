"""The GroupCoordinator CustomResourceDefinition, built in Python so there is one source of truth.

The Helm chart ships the rendered copy (``helm/groupcoord/crds/``; regenerate with
``python -m groupcoord_operator crd``) and a test fails when the two differ. The operator
validates each spec against the same ``openAPIV3Schema`` before acting, so a cluster without
(or with older) schema validation still ends in a clear ``Degraded`` condition instead of a
crash loop. Rules a structural schema cannot say (heartbeat < session timeout, the partition
count never changes) are CEL ``x-kubernetes-validations`` here *and* checked again by
:func:`groupcoord_operator.spec.parse_spec`.
"""

from __future__ import annotations

from typing import Any

GROUP = "groupcoord.io"
VERSION = "v1alpha1"
KIND = "GroupCoordinator"
PLURAL = "groupcoordinators"
SINGULAR = "groupcoordinator"
SHORT_NAMES = ["gcoord"]
API_VERSION = f"{GROUP}/{VERSION}"

MAX_PARTITIONS = 1024
MAX_SHARDS = 256
MAX_THREADS = 64
MAX_STANDBYS = 3
ASSIGNORS = ["uniform", "range"]
MIGRATION_POLICIES = ["disabled", "downgrade", "upgrade", "bidirectional"]
SASL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SERVICE_TYPES = ["ClusterIP", "NodePort", "LoadBalancer"]
CONDITION_TYPES = ["Ready", "Progressing", "Degraded"]


def _int(description: str, minimum: int, maximum: int | None = None, default: int | None = None) -> dict:
    schema: dict[str, Any] = {"type": "integer", "minimum": minimum, "description": description}
    if maximum is not None:
        schema["maximum"] = maximum
    if default is not None:
        schema["default"] = default
    return schema


def _secret_key_ref(description: str) -> dict:
    return {
        "type": "object",
        "description": description,
        "required": ["name", "key"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "description": "Secret name (same namespace)."},
            "key": {"type": "string", "minLength": 1, "description": "Key within the Secret."},
        },
    }


def _resource_requirements(description: str) -> dict:
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


def spec_schema() -> dict[str, Any]:
    """The ``spec`` schema: ranges and enums the API server enforces on every write."""
    return {
        "type": "object",
        "description": "Desired state of one group-coordinator cluster.",
        "required": ["kafka", "stateTopic", "shards"],
        "x-kubernetes-validations": [
            {
                "rule": "self.standbysPerPartition < self.shards || self.standbysPerPartition == 0",
                "message": "standbysPerPartition must be smaller than shards (a standby lives on another shard)",
            }
        ],
        "properties": {
            "image": {
                "type": "string",
                "description": "Container image of the shard and gateway processes; the operator's default when empty.",
            },
            "imagePullPolicy": {
                "type": "string",
                "enum": ["Always", "IfNotPresent", "Never"],
                "default": "IfNotPresent",
                "description": "Pull policy for the workload image.",
            },
            "serviceAccountName": {
                "type": "string",
                "description": "ServiceAccount of shard and gateway pods; it needs get/list/watch on groupcoordinators to read leadership.",
            },
            "kafka": {
                "type": "object",
                "description": "The upstream Kafka cluster: forwarded traffic and the state topic.",
                "required": ["bootstrapServers"],
                "properties": {
                    "bootstrapServers": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Comma-separated host:port list of Kafka brokers.",
                    },
                    "tls": {
                        "type": "object",
                        "description": "TLS to the brokers.",
                        "properties": {
                            "enabled": {"type": "boolean", "default": False, "description": "Use TLS."},
                            "caSecret": _secret_key_ref(
                                "CA bundle (PEM) that signs the broker certificates."
                            ),
                            "certSecret": _secret_key_ref("Client certificate (PEM) for mutual TLS."),
                            "keySecret": _secret_key_ref("Client private key (PEM) for mutual TLS."),
                        },
                    },
                    "sasl": {
                        "type": "object",
                        "description": "SASL authentication to the brokers.",
                        "required": ["mechanism", "usernameSecret", "passwordSecret"],
                        "properties": {
                            "mechanism": {
                                "type": "string",
                                "enum": SASL_MECHANISMS,
                                "description": "SASL mechanism.",
                            },
                            "usernameSecret": _secret_key_ref("The SASL user name."),
                            "passwordSecret": _secret_key_ref("The SASL password."),
                        },
                    },
                },
            },
            "stateTopic": {
                "type": "object",
                "description": "The compacted Kafka topic holding group state; one partition = one single-writer event loop.",
                "required": ["partitions"],
                "properties": {
                    "name": {
                        "type": "string",
                        "default": "__groupcoord_state",
                        "pattern": r"^[a-zA-Z0-9._-]{1,249}$",
                        "description": "Topic name.",
                    },
                    "partitions": {
                        **_int(
                            "Number of state-topic partitions; fixed at creation (a group lives on "
                            "partition hash(group id) mod partitions, so changing it would orphan group state).",
                            1,
                            MAX_PARTITIONS,
                        ),
                        "x-kubernetes-validations": [
                            {"rule": "self == oldSelf", "message": "stateTopic.partitions is immutable"}
                        ],
                    },
                },
            },
            "shards": _int("Number of coordinator shard pods (StatefulSet replicas).", 1, MAX_SHARDS),
            "threadsPerShard": _int("Event-loop worker threads per shard.", 1, MAX_THREADS, 2),
            "standbysPerPartition": _int(
                "Hot standbys tailing each partition on other shards (fast failover).", 0, MAX_STANDBYS, 0
            ),
            "groupDefaults": {
                "type": "object",
                "description": "Defaults for groups that do not override them (IncrementalAlterConfigs on GROUP).",
                "x-kubernetes-validations": [
                    {
                        "rule": "!has(self.heartbeatIntervalMs) || !has(self.sessionTimeoutMs) || self.heartbeatIntervalMs < self.sessionTimeoutMs",
                        "message": "heartbeatIntervalMs must be smaller than sessionTimeoutMs",
                    }
                ],
                "properties": {
                    "sessionTimeoutMs": _int("Consumer group session timeout.", 1000, 3_600_000, 45000),
                    "heartbeatIntervalMs": _int("Consumer group heartbeat interval.", 100, 600_000, 5000),
                    "assignors": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "string", "enum": ASSIGNORS},
                        "default": ["uniform", "range"],
                        "description": "Server-side assignors, preferred first (KIP-848).",
                    },
                    "maxGroupSize": _int("Maximum members per group.", 1, 1_000_000, 1000),
                    "migrationPolicy": {
                        "type": "string",
                        "enum": MIGRATION_POLICIES,
                        "default": "bidirectional",
                        "description": "Online migration between classic and consumer protocol (group.consumer.migration.policy).",
                    },
                },
            },
            "gateway": {
                "type": "object",
                "description": "The Kafka-protocol gateway clients bootstrap to.",
                "properties": {
                    "replicas": _int("Gateway pods.", 1, 64, 2),
                    "serviceType": {
                        "type": "string",
                        "enum": SERVICE_TYPES,
                        "default": "ClusterIP",
                        "description": "Service type of the client-facing gateway Service.",
                    },
                },
            },
            "resources": {
                "type": "object",
                "description": "Compute resources of the workloads.",
                "properties": {
                    "shard": _resource_requirements("Resources of each shard container."),
                    "gateway": _resource_requirements("Resources of each gateway container."),
                },
            },
        },
    }


def status_schema() -> dict[str, Any]:
    """The ``status`` schema: leadership shards and gateways read, plus conditions."""
    condition = {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string", "enum": CONDITION_TYPES},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer"},
        },
    }
    return {
        "type": "object",
        "description": "Observed state, written only by the operator.",
        "properties": {
            "observedGeneration": {"type": "integer", "description": "The spec generation last acted on."},
            "partitions": {
                "type": "array",
                "description": "Leadership per state-topic partition: the only source shards and gateways trust.",
                "items": {
                    "type": "object",
                    "required": ["partition", "leader", "epoch"],
                    "properties": {
                        "partition": {"type": "integer", "minimum": 0},
                        "leader": {"type": "integer", "minimum": 0, "description": "Leading shard id."},
                        "epoch": {"type": "integer", "minimum": 1, "description": "Leadership epoch."},
                        "standbys": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                    },
                },
            },
            "shards": {
                "type": "array",
                "description": "Health of each shard as the operator sees it.",
                "items": {
                    "type": "object",
                    "required": ["shard", "state"],
                    "properties": {
                        "shard": {"type": "integer", "minimum": 0},
                        "state": {"type": "string", "enum": ["Starting", "Ready", "Failed"]},
                        "leaders": {"type": "integer", "minimum": 0},
                    },
                },
            },
            "readyShards": {"type": "integer", "description": "Shards whose pod is Ready."},
            "conditions": {"type": "array", "items": condition},
        },
    }


def build_crd() -> dict[str, Any]:
    """The whole CustomResourceDefinition object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "groupcoord"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": SHORT_NAMES,
                "categories": ["groupcoord"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Partitions", "type": "integer", "jsonPath": ".spec.stateTopic.partitions"},
                        {"name": "Shards", "type": "integer", "jsonPath": ".spec.shards"},
                        {"name": "Threads", "type": "integer", "jsonPath": ".spec.threadsPerShard"},
                        {"name": "Ready-Shards", "type": "integer", "jsonPath": ".status.readyShards"},
                        {
                            "name": "Ready",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                        },
                        {
                            "name": "Degraded",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Degraded")].status',
                        },
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A Kafka group-coordinator cluster (gateway + coordinator shards).",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema(),
                                "status": status_schema(),
                            },
                        }
                    },
                }
            ],
        },
    }


def openapi_schema() -> dict[str, Any]:
    """The resource's openAPIV3Schema (what jsonschema validates a whole object against)."""
    return build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
