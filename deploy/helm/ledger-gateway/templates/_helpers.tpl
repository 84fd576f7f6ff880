{{/* Names and labels. */}}
{{- define "ledger-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ledger-gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "ledger-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ledger-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* On every object: the overlays' two labels, and Helm's own. */}}
{{- define "ledger-gateway.labels" -}}
app.kubernetes.io/name: {{ include "ledger-gateway.name" . }}
app.kubernetes.io/part-of: ledger-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ledger-gateway.serviceAccountName" -}}
{{- default (include "ledger-gateway.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{- define "ledger-gateway.configSecretName" -}}
{{- printf "%s-config" (include "ledger-gateway.fullname" .) }}
{{- end }}

{{- define "ledger-gateway.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* What the release renders: its objects, or (sidecar.render) one document for `helm template`. */}}
{{- define "ledger-gateway.rendersObjects" -}}
{{- if eq .Values.sidecar.render "none" }}true{{ end }}
{{- end }}

{{/* The gateway's own Deployment (ingress mode) rather than a participant's pod (sidecar mode). */}}
{{- define "ledger-gateway.ownPods" -}}
{{- if and (include "ledger-gateway.rendersObjects" .) (eq .Values.mode "ingress") }}true{{ end }}
{{- end }}

{{/* ServiceMonitor or PodMonitor, or nothing. */}}
{{- define "ledger-gateway.monitorKind" -}}
{{- with .Values.monitoring.monitor }}
{{- if .enabled }}
{{- if ne .kind "auto" }}{{ .kind }}{{ else if eq $.Values.mode "ingress" }}ServiceMonitor{{ else }}PodMonitor{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The pods the Service and monitors select: the gateway's own, or the participant's. */}}
{{- define "ledger-gateway.podSelector" -}}
{{- if eq .Values.mode "ingress" }}
{{- include "ledger-gateway.selectorLabels" . }}
{{- else }}
{{- toYaml .Values.sidecar.participant.podLabels }}
{{- end }}
{{- end }}
