#!/usr/bin/env bash
# Installs the pinned official Node SDKs into tests/node/node_modules (git-ignored via tests/node/.gitignore).
set -euo pipefail
cd "$(dirname "$0")"
if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
