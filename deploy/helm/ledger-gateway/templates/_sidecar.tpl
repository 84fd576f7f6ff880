{{/* What sidecar mode adds to the participant's pod, and to its participant container. */}}
{{- define "ledger-gateway.participantEnv" -}}
{{- if .Values.sidecar.participant.jsonApiOnLoopback }}
# The JSON Ledger API on loopback only: reachable from this pod (the gateway), from nowhere else.
# The Canton image applies ADDITIONAL_CONFIG_* after its own config, which binds 0.0.0.0:7575.
- name: ADDITIONAL_CONFIG_JSON_API_LOOPBACK
  value: canton.participants.{{ .Values.sidecar.participant.cantonName }}.http-ledger-api.address = "127.0.0.1"
{{- end }}
{{- end }}

{{/* A strategic merge patch of the participant's Deployment. */}}
{{- define "ledger-gateway.sidecarPatch" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Values.sidecar.participant.deployment }}
spec:
  template:
    spec:
      # The Service would hand every container of the pod LEDGER_GATEWAY_PORT=tcp://... and kin.
      enableServiceLinks: false
      terminationGracePeriodSeconds: {{ include "ledger-gateway.terminationGracePeriodSeconds" . }}
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      initContainers:
        {{- include "ledger-gateway.container" (dict "root" . "sidecar" true) | nindent 8 }}
      {{- with include "ledger-gateway.participantEnv" . }}
      containers:
        - name: {{ $.Values.sidecar.participant.container }}
          env:
            {{- . | nindent 12 }}
      {{- end }}
      volumes:
        {{- include "ledger-gateway.volumes" . | nindent 8 }}
{{- end }}

{{/* The Splice participant chart renders extraVolumes' names and secretName or claimName only. */}}
{{- define "ledger-gateway.spliceVolumes" -}}
{{- range (include "ledger-gateway.volumes" . | fromYamlArray) }}
- name: {{ .name }}
  {{- if .secret }}
  secret:
    secretName: {{ .secret.secretName }}
  {{- else }}
  persistentVolumeClaim:
    claimName: {{ .persistentVolumeClaim.claimName }}
  {{- end }}
{{- end }}
{{- end }}
