#!/usr/bin/env bash
# Install the real agent CLIs the real-client tests drive, pinned, into .cache/clients (never
# globally): Claude Code and Codex CLI from npm. Idempotent: a stamp records the pinned versions.
#
#   scripts/setup_clients.sh          # install (or keep) the pinned versions
#   DELTAMEM_CLIENTS=.cache/clients   # where they go (tests read the same variable)
#
# Needs node and npm (>= 18); nothing else. The CLIs are only ever run by tests/realclients
# inside a network namespace with loopback only, against a scripted model server.
set -euo pipefail
cd "$(dirname "$0")/.."

CLAUDE_CODE_VERSION=2.1.197
CODEX_VERSION=0.171.0
DIR=${DELTAMEM_CLIENTS:-.cache/clients}
STAMP="$DIR/.versions"
want="@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION @openai/codex@$CODEX_VERSION"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x "$DIR/node_modules/.bin/claude" ] \
    && [ -x "$DIR/node_modules/.bin/codex" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "error: npm is needed to install the real-client CLIs (Claude Code, Codex); install" \
       "Node.js >= 18, then run scripts/setup_clients.sh" >&2
  exit 1
fi
mkdir -p "$DIR"
[ -f "$DIR/package.json" ] || echo '{"name": "deltamem-clients", "private": true}' > "$DIR/package.json"
# --save-exact: the pins above, exactly; --no-fund/--no-audit: no extra registry calls.
npm install --prefix "$DIR" --save-exact --no-fund --no-audit --loglevel=error \
  "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION"
"$DIR/node_modules/.bin/claude" --version
"$DIR/node_modules/.bin/codex" --version
echo "$want" > "$STAMP"
echo "real-client CLIs installed in $DIR"
