#!/bin/sh
# hookflow-db.sh: hookflow's own Postgres role and databases. The role
# `hookflow` can log in and nothing more (no superuser, CREATEDB, CREATEROLE,
# replication or RLS bypass); it owns the databases `hookflow` and
# `hookflow_receiver` and everything in them, so `hookflow migrate` and the
# reference receiver create, and own, their tables.
#
# docker-compose.yml runs it in two places, hence every step is idempotent:
#   - the postgres image runs it from /docker-entrypoint-initdb.d/ when it
#     creates a new data directory (it sources the file, or runs it when it is
#     executable: so all the work is in one subshell function, and neither
#     `set -eu` nor an exit leaks into the image's entrypoint);
#   - the hookflow-db one-shot runs it on every `docker compose up`, because
#     the image never runs init scripts on an existing volume again: a volume
#     made before this role existed gets it (and hands it the tables a
#     superuser made there), and a changed HOOKFLOW_DB_PASSWORD reaches the role.
#
# Environment: POSTGRES_HOOKFLOW_PASSWORD, the role's password (compose passes
# HOOKFLOW_DB_PASSWORD); the usual PG* variables reach the server as a
# superuser. Without them it uses the image's POSTGRES_USER on the local
# socket, as during initdb.

hookflow_db_init() (
	set -eu
	: "${POSTGRES_HOOKFLOW_PASSWORD:?POSTGRES_HOOKFLOW_PASSWORD is not set}"
	PGUSER="${PGUSER:-${POSTGRES_USER:-postgres}}"
	PGDATABASE="${PGDATABASE:-postgres}"
	export PGUSER PGDATABASE

	# \getenv keeps the password off psql's command line; :'password' quotes it.
	psql -v ON_ERROR_STOP=1 --no-psqlrc --quiet <<'SQL'
\getenv password POSTGRES_HOOKFLOW_PASSWORD
SELECT 'CREATE ROLE hookflow'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'hookflow')
\gexec
-- Every run: the password follows HOOKFLOW_DB_PASSWORD, and a role someone
-- widened by hand is narrowed again.
ALTER ROLE hookflow WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
    PASSWORD :'password';

SELECT 'CREATE DATABASE hookflow OWNER hookflow'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'hookflow')
\gexec
SELECT 'CREATE DATABASE hookflow_receiver OWNER hookflow'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'hookflow_receiver')
\gexec
-- Databases a superuser created before this role existed.
ALTER DATABASE hookflow OWNER TO hookflow;
ALTER DATABASE hookflow_receiver OWNER TO hookflow;
SQL

	# What a superuser created inside them before (migrations used to run as
	# postgres): the role must own the tables it migrates. REASSIGN OWNED BY
	# postgres cannot do it (postgres also owns the system catalogs), so each
	# object is altered by kind. Sequences that belong to a column follow their
	# table; extension members stay with their extension.
	for db in hookflow hookflow_receiver; do
		psql -v ON_ERROR_STOP=1 --no-psqlrc --quiet --dbname "$db" <<'SQL'
SELECT format('ALTER SCHEMA %I OWNER TO hookflow', n.nspname)
FROM pg_namespace n
WHERE n.nspname NOT IN ('public', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
  AND n.nspowner <> 'hookflow'::regrole
  AND NOT EXISTS (SELECT FROM pg_depend d
                  WHERE d.classid = 'pg_namespace'::regclass AND d.objid = n.oid AND d.deptype = 'e')
\gexec
SELECT format('ALTER %s %s OWNER TO hookflow',
              CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                             WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
              c.oid::regclass)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND c.relowner <> 'hookflow'::regrole
  AND NOT EXISTS (SELECT FROM pg_depend d
                  WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i', 'e'))
\gexec
SELECT format('ALTER ROUTINE %s OWNER TO hookflow', p.oid::regprocedure)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND p.proowner <> 'hookflow'::regrole
  AND NOT EXISTS (SELECT FROM pg_depend d
                  WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
\gexec
SQL
	done
	echo 'hookflow role and databases ready'
)

hookflow_db_init
