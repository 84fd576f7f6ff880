{{/*
The gateway's config: what the release writes into its Secret (config, with the redis values
written into protection.redis), and what the templates read from it (the same over the schema's
defaults, _config-defaults.tpl, so that an unset port is the gateway's own default).
*/}}

{{/* Where the chart mounts the Redis password Secrets; the config names the files there. */}}
{{- define "ledger-gateway.redisPasswordDirectory" -}}/etc/ledger-gateway/redis{{- end }}
{{- define "ledger-gateway.sentinelPasswordDirectory" -}}/etc/ledger-gateway/redis-sentinel{{- end }}

{{- define "ledger-gateway.redisSettings" -}}
{{- $redis := .Values.redis }}
{{- $settings := dict }}
{{- $password := "" }}
{{- if $redis.passwordSecret.name }}
{{- $password = printf "${file:%s/%s}" (include "ledger-gateway.redisPasswordDirectory" .) $redis.passwordSecret.key }}
{{- end }}
{{- if eq $redis.mode "node" }}
{{- $credentials := "" }}
{{- if or $redis.username $password }}
{{- $credentials = printf "%s%s@" $redis.username (ternary (printf ":%s" $password) "" (ne $password "")) }}
{{- end }}
{{- $_ := set $settings "url" (printf "%s://%s%s" (ternary "rediss" "redis" $redis.tls) $credentials $redis.address) }}
{{- else }}
{{- if eq $redis.mode "sentinel" }}
{{- $sentinel := dict "nodes" $redis.nodes "masterName" $redis.masterName }}
{{- if $redis.sentinelPasswordSecret.name }}
{{- $_ := set $sentinel "password" (printf "${file:%s/%s}" (include "ledger-gateway.sentinelPasswordDirectory" .) $redis.sentinelPasswordSecret.key) }}
{{- end }}
{{- $_ := set $settings "sentinel" $sentinel }}
{{- else }}
{{- $_ := set $settings "cluster" (dict "nodes" $redis.nodes) }}
{{- end }}
{{- if $redis.username }}{{ $_ := set $settings "username" $redis.username }}{{ end }}
{{- if $password }}{{ $_ := set $settings "password" $password }}{{ end }}
{{- end }}
{{- toYaml $settings }}
{{- end }}

{{/* The config the release writes: values.config, and protection.redis from the redis values. */}}
{{- define "ledger-gateway.configYaml" -}}
{{- $config := deepCopy (.Values.config | default dict) }}
{{- if .Values.redis.mode }}
{{- $protection := get $config "protection" | default dict }}
{{- $redis := get $protection "redis" | default dict }}
{{- range list "url" "sentinel" "cluster" }}
{{- if hasKey $redis . }}
{{- fail (printf "redis.mode: config.protection.redis.%s is set too; give Redis in one place" .) }}
{{- end }}
{{- end }}
{{- $redis = mergeOverwrite $redis (include "ledger-gateway.redisSettings" . | fromYaml) }}
{{- $_ := set $protection "redis" $redis }}
{{- $_ := set $config "protection" $protection }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* The config the gateway runs with, as far as the templates read it: the schema's defaults under it. */}}
{{- define "ledger-gateway.effectiveConfig" -}}
{{- $defaults := include "ledger-gateway.configDefaults" . | fromJson }}
{{- toYaml (mergeOverwrite $defaults (include "ledger-gateway.configYaml" . | fromYaml)) }}
{{- end }}

{{/*
NODE_OPTIONS by the memory rule of docs/operations.md "Memory": the limit is 25% over the old-space
cap plus 64 MiB beside it (code, young space, buffers) plus the body budget, so the cap is
limits.memory / 1.25 - 64 MiB - config.limits.bufferedBodyBytes.
*/}}
{{- define "ledger-gateway.nodeOptions" -}}
{{- $config := include "ledger-gateway.effectiveConfig" . | fromYaml }}
{{- $limit := .Values.resources.limits.memory }}
{{- $number := regexFind "^[0-9]+" $limit | int }}
{{- $limitMiB := ternary (mul $number 1024) $number (hasSuffix "Gi" $limit) }}
{{- $bufferedMiB := div (add (int $config.limits.bufferedBodyBytes) 1048575) 1048576 }}
{{- $oldSpaceMiB := sub (sub (div (mul $limitMiB 4) 5) 64) $bufferedMiB }}
{{- if lt $oldSpaceMiB 64 }}
{{- fail (printf "resources.limits.memory: %s leaves V8 an old space of %d MiB by the memory rule (docs/operations.md \"Memory\": limit / 1.25 - 64 MiB - config.limits.bufferedBodyBytes of %d MiB); 64 MiB at least" $limit $oldSpaceMiB $bufferedMiB) }}
{{- end }}
{{- printf "--max-old-space-size=%d --max-semi-space-size=%d" $oldSpaceMiB (int .Values.semiSpaceMiB) }}
{{- end }}

{{/* Seconds the gateway needs from the preStop hook to its exit: preStop, drain delay and grace, the last export. */}}
{{- define "ledger-gateway.stopSeconds" -}}
{{- $config := include "ledger-gateway.effectiveConfig" . | fromYaml }}
{{- $shutdownMs := add (int $config.shutdown.drainDelayMs) (int $config.shutdown.graceMs) (int .Values.opentelemetry.exportTimeoutMs) }}
{{- add (int .Values.preStopSleepSeconds) (div (add $shutdownMs 999) 1000) }}
{{- end }}

{{/* The pod's grace period, refused unless it covers the gateway's stop (after the participant's, as a sidecar). */}}
{{- define "ledger-gateway.terminationGracePeriodSeconds" -}}
{{- $needed := include "ledger-gateway.stopSeconds" . | int }}
{{- $given := .Values.terminationGracePeriodSeconds | int }}
{{- $key := "terminationGracePeriodSeconds" }}
{{- if eq .Values.mode "sidecar" }}
{{- $needed = add $needed (.Values.sidecar.participant.shutdownSeconds | int) }}
{{- $given = .Values.sidecar.participant.terminationGracePeriodSeconds | int }}
{{- $key = "sidecar.participant.terminationGracePeriodSeconds" }}
{{- end }}
{{- if le $given $needed }}
{{- fail (printf "%s: %d s does not cover the gateway's stop, %d s (preStopSleepSeconds + config.shutdown.drainDelayMs + graceMs + opentelemetry.exportTimeoutMs%s)" $key $given $needed (ternary " after sidecar.participant.shutdownSeconds" "" (eq .Values.mode "sidecar"))) }}
{{- end }}
{{- $given }}
{{- end }}
