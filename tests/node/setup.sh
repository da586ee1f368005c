#!/usr/bin/env bash
# Install the pinned official Node SDKs (openai, @anthropic-ai/sdk, @google/genai, @modelcontextprotocol/sdk) into
# tests/node/node_modules (git-ignored by tests/node/.gitignore) for tests/node/test_node_sdks.py and tests/mcp/test_mcp_node.py.
# Skips (exit 0, with a message) when node >= 18 or npm is missing; the pytest wrapper then skips too.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "tests/node/setup.sh: node/npm not found; skipping (test_node_sdks.py will skip)." >&2
  exit 0
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
  echo "tests/node/setup.sh: node $(node --version) is older than 18; skipping." >&2
  exit 0
fi
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  npm install --no-audit --no-fund
fi
