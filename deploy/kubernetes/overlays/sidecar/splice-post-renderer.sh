#!/bin/sh
# Helm post-renderer for the Splice participant chart with the sidecar of
# splice-participant-values.yaml: the chart has no value for the pod's enableServiceLinks, so this
# sets it to false on the chart's Deployments (the reason: participant.yaml, part (4)).
#   helm upgrade ... -f splice-participant-values.yaml --post-renderer deploy/kubernetes/overlays/sidecar/splice-post-renderer.sh
# Helm gives the rendered manifests on stdin and applies what this prints; needs kubectl 1.27+.
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/chart.yaml"
cat >"$work/kustomization.yaml" <<'KUSTOMIZATION'
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - chart.yaml
patches:
  - target:
      kind: Deployment
    patch: |-
      - op: add
        path: /spec/template/spec/enableServiceLinks
        value: false
KUSTOMIZATION
kubectl kustomize "$work"
