#!/usr/bin/env bash
# The former name of install-kubernetes-tools.sh, kept for scripts that call it: kubectl alone.
#   bash scripts/install-kubectl.sh [DIR]
exec bash "$(dirname "$0")/install-kubernetes-tools.sh" "$@" kubectl
