{{/* Names and labels shared by every template. */}}

{{- define "groupcoord.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "groupcoord.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The GroupCoordinator resource name; workloads become <name>-shard / <name>-gateway. */}}
{{- define "groupcoord.coordinatorName" -}}
{{- default (include "groupcoord.fullname" .) .Values.coordinator.name }}
{{- end }}

{{- define "groupcoord.operatorName" -}}
{{- printf "%s-operator" (include "groupcoord.fullname" .) }}
{{- end }}

{{/* ServiceAccount of shard and gateway pods: reads leadership from the resource status. */}}
{{- define "groupcoord.workloadServiceAccount" -}}
{{- printf "%s-workload" (include "groupcoord.fullname" .) }}
{{- end }}

{{- /* registry/repository:tag, or registry/repository@digest when image.digest is set (a
digest pins the exact image; the tag is then left out, as the runtime would ignore it) */}}
{{- define "groupcoord.image" -}}
{{- $repository := .Values.image.repository }}
{{- if .Values.image.registry }}
{{- $repository = printf "%s/%s" .Values.image.registry .Values.image.repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "groupcoord.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "groupcoord.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: groupcoord
{{- end }}

{{- define "groupcoord.operatorSelector" -}}
app.kubernetes.io/name: {{ include "groupcoord.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* Namespaces the operator acts in (namespaced RBAC); the release namespace by default. */}}
{{- define "groupcoord.watchNamespaces" -}}
{{- if .Values.operator.watchNamespaces }}
{{- join "," .Values.operator.watchNamespaces }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/* The rules the operator needs on the objects it reconciles (and nothing more). */}}
{{- define "groupcoord.operatorRules" -}}
- apiGroups: [groupcoord.io]
  resources: [groupcoordinators]
  verbs: [get, list, watch, patch]
- apiGroups: [groupcoord.io]
  resources: [groupcoordinators/status]
  verbs: [get, patch]
- apiGroups: [groupcoord.io]
  resources: [groupcoordinators/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [statefulsets, deployments]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create, patch, delete]  # delete: Services of listeners removed from the spec
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create]
{{- end }}
