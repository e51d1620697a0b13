"""The receiver's SQL, from the Go kit's files (kit/receiver: migrations/,
migrations_table.sql, queries/), shipped inside this package: one schema,
one migration ledger and one set of request-path statements for every kit,
so a database migrated by one is served by any."""

from __future__ import annotations

import re
from importlib import resources

import psycopg

_SQL = resources.files(__package__) / "_sql"


def _queries(name: str) -> dict[str, str]:
    text = (_SQL / "queries" / name).read_text()
    out = {}
    for block in re.split(r"^-- name: ", text, flags=re.M)[1:]:
        lines = block.split("\n")
        stmt = "\n".join(line for line in lines[1:] if not line.startswith("--")).strip()
        # sqlc's $n parameters as psycopg's named ones, so a parameter used
        # twice is passed once.
        out[lines[0].split(" ")[0]] = re.sub(r"\$(\d+)", r"%(p\1)s", stmt)
    return out


Q = _queries("events.sql")
_M = _queries("migrations.sql")


def params(*values: object) -> dict[str, object]:
    """$1, $2, … of a statement in Q."""
    return {f"p{i}": v for i, v in enumerate(values, 1)}


def _migrations() -> list[tuple[int, str, str]]:
    out = []
    for f in (_SQL / "migrations").iterdir():
        if f.name.endswith(".up.sql"):
            name = f.name[: -len(".up.sql")]
            out.append((int(name.split("_", 1)[0]), name, f.read_text()))
    return sorted(out)


def migrate(conninfo: str) -> list[str]:
    """Applies the kit's pending migrations in one transaction, recorded in
    receiver_schema_migrations under the advisory lock the Go kit takes:
    safe from several processes at once, and idempotent. Returns what it
    applied."""
    applied = []
    with psycopg.connect(conninfo) as conn:
        conn.execute(_M["MigrationLock"])
        conn.execute((_SQL / "migrations_table.sql").read_text())
        done = {r[0] for r in conn.execute(_M["MigrationList"])}
        for version, name, sql in _migrations():
            if version in done:
                continue
            conn.execute(sql)
            conn.execute(_M["MigrationInsert"], params(version, name))
            applied.append(name)
    return applied


def pending_migrations(conninfo: str) -> list[str]:
    """The names of the kit's migrations the database lacks (none: ready to serve)."""
    with psycopg.connect(conninfo) as conn:
        done: set[int] = set()
        if conn.execute(_M["MigrationTableExists"]).fetchone()[0]:
            done = {r[0] for r in conn.execute(_M["MigrationList"])}
    return [name for version, name, _ in _migrations() if version not in done]
