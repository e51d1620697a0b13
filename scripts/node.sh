#!/usr/bin/env bash
# Makes sure this machine has what the TypeScript client, the TypeScript
# receiver kit and the OpenAPI linter need: Node.js (at least 20.19, what
# @redocly/cli asks) and npm, and the packages clients/typescript's and
# kit/receiver-ts's package-lock.json pin, installed with npm ci when a lock
# file changed since the last install. Installs Node.js
# with apt when it is missing and we may; otherwise says the exact command
# and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

node_ok() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
    node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'
}

if ! node_ok; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1 && ! command -v node >/dev/null 2>&1; then
    echo "installing Node.js (apt-get install -y nodejs npm)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq nodejs npm >/dev/null
  fi
  if ! node_ok; then
    echo "hookflow's TypeScript client and OpenAPI linter need Node.js 20.19 or later with npm (found: $(node --version 2>/dev/null || echo none)): sudo apt-get install -y nodejs npm, or Node.js from nodejs.org" >&2
    exit 1
  fi
fi

# The TypeScript client's packages, and the TypeScript receiver kit's.
for dir in clients/typescript kit/receiver-ts; do
  stamp=$dir/node_modules/.package-lock.sha256
  sum=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [[ $(cat "$stamp" 2>/dev/null) != "$sum" ]]; then
    echo "installing the packages of $dir (npm ci)..." >&2
    # No telemetry and no update notices from the tools (no outbound traffic
    # but the registry's).
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$sum" >"$stamp"
  fi
done
