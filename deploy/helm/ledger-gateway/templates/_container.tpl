{{/*
The gateway container, its volumes and its participant's changes: one definition for the gateway's
own Deployment (ingress mode) and for the native sidecar the post-renderer or the Splice values add
to a participant's pod (sidecar mode). Called with (dict "root" $ "sidecar" <bool>).
*/}}
{{- define "ledger-gateway.container" -}}
{{- $root := .root }}
{{- $values := $root.Values }}
{{- $config := include "ledger-gateway.effectiveConfig" $root | fromYaml -}}
- name: ledger-gateway
  {{- if .sidecar }}
  # Native sidecar: starts before the participant, runs as long as the pod, stops after it.
  restartPolicy: Always
  {{- end }}
  image: {{ include "ledger-gateway.image" $root }}
  imagePullPolicy: {{ $values.image.pullPolicy }}
  # No command or args: the image's entry command runs (deploy/Dockerfile), with
  # --config /etc/ledger-gateway/config/config.yaml.
  ports:
    - name: gateway-http
      containerPort: {{ $config.server.port }}
      protocol: TCP
    - name: gateway-admin
      containerPort: {{ $config.admin.port }}
      protocol: TCP
  env:
    - name: K8S_POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: K8S_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    - name: K8S_NODE_NAME
      valueFrom:
        fieldRef:
          fieldPath: spec.nodeName
    - name: NODE_OPTIONS
      value: {{ include "ledger-gateway.nodeOptions" $root | quote }}
    - name: OTEL_SERVICE_NAME
      value: ledger-gateway
    - name: OTEL_RESOURCE_ATTRIBUTES
      value: k8s.pod.name=$(K8S_POD_NAME),k8s.namespace.name=$(K8S_NAMESPACE),k8s.node.name=$(K8S_NODE_NAME)
    - name: OTEL_EXPORTER_OTLP_ENDPOINT
      value: {{ $values.opentelemetry.endpoint | quote }}
    - name: OTEL_EXPORTER_OTLP_PROTOCOL
      value: {{ $values.opentelemetry.protocol | quote }}
    - name: OTEL_EXPORTER_OTLP_TIMEOUT
      value: {{ $values.opentelemetry.exportTimeoutMs | int | quote }}
    - name: OTEL_BSP_EXPORT_TIMEOUT
      value: {{ $values.opentelemetry.exportTimeoutMs | int | quote }}
    - name: OTEL_TRACES_SAMPLER
      value: {{ $values.opentelemetry.sampler | quote }}
    - name: OTEL_TRACES_SAMPLER_ARG
      value: {{ $values.opentelemetry.samplerArg | quote }}
    {{- if $values.participantIdentityProviders.enabled }}
    - name: LEDGER_GATEWAY_AUTH__PARTICIPANT_IDENTITY_PROVIDERS__ENABLED
      value: "true"
    - name: LEDGER_GATEWAY_AUTH__PARTICIPANT_IDENTITY_PROVIDERS__TOKEN_FILE
      value: /etc/ledger-gateway/participant-admin/token
    {{- end }}
    {{- if $values.auditTrail.enabled }}
    # Before the directory that expands it: $(POD_NAME) expands only a variable above it.
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: LEDGER_GATEWAY_AUDIT__ENABLED
      value: "true"
    - name: LEDGER_GATEWAY_AUDIT__DIRECTORY
      value: /var/lib/ledger-gateway/audit/$(POD_NAME)
    - name: LEDGER_GATEWAY_AUDIT__SIGNING_KEY_FILE
      value: /etc/ledger-gateway/audit-signing-key/private.pem
    {{- end }}
    {{- with $values.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  volumeMounts:
    # Directories, never subPath: the kubelet updates a directory mount when its Secret changes.
    - name: ledger-gateway-config
      mountPath: /etc/ledger-gateway/config
      readOnly: true
    - name: ledger-gateway-secrets
      mountPath: /etc/ledger-gateway/secrets
      readOnly: true
    {{- if $values.participantIdentityProviders.enabled }}
    - name: ledger-gateway-participant-admin-token
      mountPath: /etc/ledger-gateway/participant-admin
      readOnly: true
    {{- end }}
    {{- if $values.auditTrail.enabled }}
    - name: ledger-gateway-audit
      mountPath: /var/lib/ledger-gateway/audit
    - name: ledger-gateway-audit-signing-key
      mountPath: /etc/ledger-gateway/audit-signing-key
      readOnly: true
    {{- end }}
    {{- if and $values.redis.mode $values.redis.passwordSecret.name }}
    - name: ledger-gateway-redis-password
      mountPath: {{ include "ledger-gateway.redisPasswordDirectory" $root }}
      readOnly: true
    {{- end }}
    {{- if and (eq $values.redis.mode "sentinel") $values.redis.sentinelPasswordSecret.name }}
    - name: ledger-gateway-sentinel-password
      mountPath: {{ include "ledger-gateway.sentinelPasswordDirectory" $root }}
      readOnly: true
    {{- end }}
  # Started = the process serves (/livez). Never /readyz: a native sidecar must report started
  # before the participant container is even created.
  startupProbe:
    httpGet:
      path: /livez
      port: gateway-admin
    periodSeconds: 2
    timeoutSeconds: 2
    failureThreshold: 30
  livenessProbe:
    httpGet:
      path: /livez
      port: gateway-admin
    periodSeconds: 10
    timeoutSeconds: 2
    failureThreshold: 3
  # Ready = the participant answers and every issuer's keys are loaded; /readyz re-probes a failing
  # participant for up to 2 s, hence the 3 s timeout.
  readinessProbe:
    httpGet:
      path: /readyz
      port: gateway-admin
    periodSeconds: 5
    timeoutSeconds: 3
    failureThreshold: 2
  # Services and proxies drop the pod while it still serves; then SIGTERM, and the gateway drains.
  lifecycle:
    preStop:
      sleep:
        seconds: {{ $values.preStopSleepSeconds }}
  resources:
    {{- toYaml $values.resources | nindent 4 }}
  securityContext:
    {{- toYaml $values.securityContext | nindent 4 }}
{{- end }}

{{/* The volumes the container mounts. Called with the root context. */}}
{{- define "ledger-gateway.volumes" -}}
# config.yaml alone: nothing else lands in the directory the gateway watches.
- name: ledger-gateway-config
  secret:
    secretName: {{ include "ledger-gateway.configSecretName" . }}
    defaultMode: 0440
    items:
      - key: config.yaml
        path: config.yaml
- name: ledger-gateway-secrets
  secret:
    secretName: {{ .Values.secrets.name }}
    defaultMode: 0440
    optional: {{ .Values.secrets.optional }}
{{- if .Values.participantIdentityProviders.enabled }}
- name: ledger-gateway-participant-admin-token
  secret:
    secretName: {{ .Values.participantIdentityProviders.tokenSecret }}
    defaultMode: 0440
    items:
      - key: token
        path: token
{{- end }}
{{- if .Values.auditTrail.enabled }}
- name: ledger-gateway-audit
  persistentVolumeClaim:
    claimName: {{ .Values.auditTrail.claimName }}
- name: ledger-gateway-audit-signing-key
  secret:
    secretName: {{ .Values.auditTrail.signingKeySecret }}
    defaultMode: 0440
    items:
      - key: private.pem
        path: private.pem
{{- end }}
{{- with .Values.redis }}
{{- if and .mode .passwordSecret.name }}
- name: ledger-gateway-redis-password
  secret:
    secretName: {{ .passwordSecret.name }}
    defaultMode: 0440
    items:
      - key: {{ .passwordSecret.key }}
        path: {{ .passwordSecret.key }}
{{- end }}
{{- if and (eq .mode "sentinel") .sentinelPasswordSecret.name }}
- name: ledger-gateway-sentinel-password
  secret:
    secretName: {{ .sentinelPasswordSecret.name }}
    defaultMode: 0440
    items:
      - key: {{ .sentinelPasswordSecret.key }}
        path: {{ .sentinelPasswordSecret.key }}
{{- end }}
{{- end }}
{{- end }}

{{/* The pod template's annotations: the config's checksum rolls the pods on a change. */}}
{{- define "ledger-gateway.podAnnotations" -}}
{{- if .Values.rollOnConfigChange }}
checksum/ledger-gateway-config: {{ include "ledger-gateway.configYaml" . | sha256sum }}
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}
