#!/usr/bin/env bash
# Makes sure this machine has what hookflow's dev stack and tests need beyond
# Go: the PostgreSQL server binaries (initdb, postgres) and a 'postgres' user
# to run them as when we are root, and, with --browser (make test), what only
# the tests drive: Debian's Chromium, which the customer portal's browser
# tests run headless (e2e/portal_browser_test.go), and the brokers that the
# broker destinations are tested against for real, redis-server and
# rabbitmq-server (the NATS server is built from its own Go module), and the
# Python packages the Python receiver kit and client are built on and tested
# with (psycopg 3, httpx, pytest: Debian's, for /usr/bin/python3). make run
# needs none of those. Installs them with apt when they are missing and we
# may; otherwise says the exact command and fails.
set -euo pipefail

browser=false
case "${1:-}" in
  --browser) browser=true ;;
  "") ;;
  *) echo "usage: scripts/deps.sh [--browser]" >&2; exit 2 ;;
esac

have_pg() {
  { command -v initdb && command -v postgres; } >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1
}

have_chromium() { ! $browser || command -v chromium >/dev/null 2>&1; }

have_brokers() {
  ! $browser || { command -v redis-server && command -v rabbitmq-server; } >/dev/null 2>&1
}

# The Python packages, checked by importing them with Debian's python3 (not
# whatever python3 comes first on PATH).
have_python() {
  ! $browser || /usr/bin/python3 -c 'import psycopg, httpx, pytest' >/dev/null 2>&1
}

need_user() { [[ $(id -u) == 0 ]] && ! id postgres >/dev/null 2>&1; }

if have_pg && ! need_user && have_chromium && have_brokers && have_python; then
  exit 0
fi
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  if $browser; then
    echo "hookflow's tests need the PostgreSQL server binaries, Chromium, the brokers and Python's psycopg, httpx and pytest: sudo apt-get update && sudo apt-get install -y postgresql chromium redis-server rabbitmq-server python3-psycopg python3-httpx python3-pytest" >&2
  else
    echo "hookflow needs the PostgreSQL server binaries: sudo apt-get update && sudo apt-get install -y postgresql" >&2
  fi
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
if ! have_pg || need_user; then
  echo "installing PostgreSQL server binaries (apt-get install -y postgresql)..." >&2
  apt-get install -y -qq postgresql >/dev/null
  # The package starts a system cluster on 5432; hookflow runs its own clusters.
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    for c in /etc/postgresql/*/main; do
      [[ -d $c ]] && pg_ctlcluster "$(basename "$(dirname "$c")")" main stop >/dev/null 2>&1 || true
    done
  fi
fi
if ! have_chromium; then
  echo "installing Chromium for the portal's browser tests (apt-get install -y chromium)..." >&2
  apt-get install -y -qq chromium >/dev/null
fi
if ! have_brokers; then
  echo "installing the brokers the tests deliver into (apt-get install -y redis-server rabbitmq-server)..." >&2
  # The packages would start system-wide services on the default ports; the
  # tests run their own servers on free ports, so nothing may start here.
  policy=/usr/sbin/policy-rc.d
  had_policy=false
  [[ -e $policy ]] && had_policy=true
  $had_policy || { printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"; }
  apt-get install -y -qq redis-server rabbitmq-server >/dev/null
  $had_policy || rm -f "$policy"
  for svc in redis-server rabbitmq-server epmd; do
    command -v systemctl >/dev/null 2>&1 && systemctl stop "$svc" >/dev/null 2>&1 || true
  done
  pkill -x redis-server >/dev/null 2>&1 || true
  pkill -f 'beam.*rabbit' >/dev/null 2>&1 || true
  pkill -x epmd >/dev/null 2>&1 || true
fi
if ! have_python; then
  echo "installing the Python packages of the receiver kit and client (apt-get install -y python3-psycopg python3-httpx python3-pytest)..." >&2
  apt-get install -y -qq python3-psycopg python3-httpx python3-pytest >/dev/null
fi
have_pg && have_chromium && have_brokers && have_python
