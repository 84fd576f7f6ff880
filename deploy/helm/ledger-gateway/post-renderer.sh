#!/bin/sh
# Helm post-renderer for a participant's chart (the Splice participant chart): adds the gateway this
# chart describes as a native sidecar to the participant's Deployment, with its volumes, the JSON API
# on loopback and no Service links. Its arguments are the gateway release's values for `helm template`
# of this chart (the same values as that release, mode: sidecar):
#   helm upgrade participant <participant chart> -n <ns> -f participant-values.yaml \
#     --post-renderer deploy/helm/ledger-gateway/post-renderer.sh \
#     --post-renderer-args=--values=gateway-values.yaml
# LEDGER_GATEWAY_RELEASE names the gateway's release (default ledger-gateway): the config Secret is
# <release>-config. Needs Helm 3.15+ (see deploy/README.md) and kubectl 1.27+ on the machine that runs helm.
set -eu
chart=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/participant-chart.yaml"
"${HELM_BIN:-helm}" template "${LEDGER_GATEWAY_RELEASE:-ledger-gateway}" "$chart" "$@" \
  --set mode=sidecar --set sidecar.render=patch >"$work/kustomization.yaml"
kubectl kustomize "$work"
