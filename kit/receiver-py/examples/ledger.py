"""An example receiver, run as a process: every applied event is a row of
example_ledger (lane, sequence, event id, data.amount), written in the kit's
transaction, so what was applied, and in what order, can be read back. The
same program exists for the TypeScript and Go kits.

    DATABASE_URL=postgres://… RECEIVER_SECRETS="whsec_new whsec_old" PORT=8090 python3 examples/ledger.py

RECEIVER_START=mid-stream takes up never-seen lanes wherever they stand.
RECEIVER_MUTANT=no-dedup or no-cursor takes the dedup record or the cursor
check out of the kit: a broken receiver, which the conformance tests run to
show that `hookflow conformance` fails it.
"""

import os
import socketserver
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import psycopg

from hookflow_receiver import Receiver, WSGIMiddleware, migrate


def apply(conn: psycopg.Connection, ev) -> None:
    amount = (ev.data or {}).get("amount", 0) if isinstance(ev.data, dict) else 0
    conn.execute("INSERT INTO example_ledger (endpoint_id, correlation_id, sequence, event_id, amount) VALUES (%s, %s, %s, %s, %s)",
                 (ev.endpoint_id, ev.correlation_id, ev.sequence, ev.id, amount))


class Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


def main() -> None:
    dsn = os.environ["DATABASE_URL"]
    mutant = os.environ.get("RECEIVER_MUTANT", "")
    if mutant not in ("", "no-dedup", "no-cursor"):
        raise SystemExit(f"RECEIVER_MUTANT={mutant}: want no-dedup or no-cursor")
    migrate(dsn)
    with psycopg.connect(dsn) as conn:
        conn.execute("""CREATE TABLE IF NOT EXISTS example_ledger (
            position bigserial PRIMARY KEY, endpoint_id text NOT NULL, correlation_id text NOT NULL,
            sequence bigint NOT NULL, event_id text NOT NULL, amount numeric NOT NULL)""")
    receiver = Receiver(dsn, os.environ.get("RECEIVER_SECRETS", "").split(), apply,
                        start_position=os.environ.get("RECEIVER_START", "beginning"),
                        _checks={"dedup": mutant != "no-dedup", "cursor": mutant != "no-cursor"})
    httpd = make_server("127.0.0.1", int(os.environ.get("PORT", "8090")), WSGIMiddleware(None, receiver),
                        server_class=Server, handler_class=QuietHandler)
    print(f"listening on http://127.0.0.1:{httpd.server_port}/webhook", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
