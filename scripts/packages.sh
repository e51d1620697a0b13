#!/usr/bin/env bash
# Builds the packages hookflow publishes beside its Go modules, as a
# registry would get them, and checks what they carry: @hookflow/receiver
# (npm pack of kit/receiver-ts, built first by make kits), and the sdists
# and wheels of hookflow-receiver (kit/receiver-py) and hookflow
# (clients/python), built by setuptools with Debian's python3 from a copy
# whose links to kit/receiver's SQL are resolved. Each receiver package must
# hold the Go kit's migrations and queries. Prints each file and its bytes;
# leaves nothing in the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python=/usr/bin/python3
need=(migrations/001_create_receiver_tables.up.sql migrations/004_lanes_per_endpoint.up.sql migrations_table.sql queries/events.sql queries/migrations.sql)

(cd kit/receiver-ts && npm pack --ignore-scripts --silent --pack-destination "$out" >/dev/null)
tgz=$out/hookflow-receiver-*.tgz
listing=$(tar tzf $tgz)
for f in dist/src/index.js dist/src/index.d.ts README.md "${need[@]/#/sql/}"; do
  grep -qx "package/$f" <<<"$listing" || { echo "@hookflow/receiver lacks $f" >&2; exit 1; }
done

for pkg in kit/receiver-py clients/python; do
  cp -rL "$pkg" "$out/src-$(basename "$pkg")"
  (cd "$out/src-$(basename "$pkg")" && rm -rf dist build src/*.egg-info &&
    $python -c 'from setuptools import build_meta as b; b.build_sdist("'"$out"'"); b.build_wheel("'"$out"'")' >/dev/null 2>&1) ||
    { echo "building $pkg failed" >&2; exit 1; }
done
whl=$(ls "$out"/hookflow_receiver-*.whl)
listing=$($python -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$whl")
for f in "${need[@]/#/hookflow_receiver/_sql/}"; do
  grep -qx "$f" <<<"$listing" || { echo "hookflow-receiver's wheel lacks $f" >&2; exit 1; }
done
cd "$out" && for f in *.tgz *.tar.gz *.whl; do printf '%8d  %s\n' "$(stat -c %s "$f")" "$f"; done
