#!/usr/bin/env bash
# Install the three coding-agent CLIs into .agents/ (git-ignored) for `make test-agents`.
# Idempotent: does nothing when the pinned versions are already installed.
# Skips (exit 0, with a message) when node or npm is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned to the versions whose wire behaviour /work/shared/AGENTS.md records.
PKGS=(
  "@anthropic-ai/claude-code@2.1.332"
  "@openai/codex@0.171.0"
  "@google/gemini-cli@0.61.0"
)
PREFIX=.agents

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "agents-setup: node/npm not found; skipping (the agent tests will skip too)." >&2
  exit 0
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "agents-setup: node $(node --version) is older than 20; skipping." >&2
  exit 0
fi

installed() {  # installed NAME@VERSION -> 0 when node_modules has exactly that version
  local spec=$1 name=${1%@*} version=${1##*@}
  local pj="$PREFIX/node_modules/$name/package.json"
  [ -f "$pj" ] && [ "$(node -p "require('./$pj').version")" = "$version" ]
}

missing=()
for spec in "${PKGS[@]}"; do
  installed "$spec" || missing+=("$spec")
done
for bin in claude codex gemini; do
  [ -x "$PREFIX/node_modules/.bin/$bin" ] || missing=("${PKGS[@]}")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "agents-setup: already installed: ${PKGS[*]}"
  exit 0
fi

mkdir -p "$PREFIX"
# Install all three at once so package.json/package-lock.json in .agents/ list them together.
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "${PKGS[@]}"
for bin in claude codex gemini; do
  test -x "$PREFIX/node_modules/.bin/$bin" || { echo "agents-setup: $bin missing after install" >&2; exit 1; }
done
echo "agents-setup: installed ${PKGS[*]} into $PREFIX/"
