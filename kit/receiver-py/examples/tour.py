import os
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIServer, make_server

import psycopg
from hookflow_receiver import Receiver, WSGIMiddleware, migrate

db = os.environ["DATABASE_URL"]
migrate(db)
with psycopg.connect(db) as conn:
    conn.execute("CREATE TABLE IF NOT EXISTS balances (account text PRIMARY KEY, amount numeric NOT NULL)")

def apply(conn, ev):
    conn.execute("INSERT INTO balances VALUES (%(a)s, %(n)s) ON CONFLICT (account) DO UPDATE SET amount = balances.amount + %(n)s",
                 {"a": ev.correlation_id, "n": ev.data["amount"]})

class Server(ThreadingMixIn, WSGIServer): pass
receiver = Receiver(db, [os.environ["WEBHOOK_SECRET"]], apply)
make_server("", int(os.environ.get("PORT", 8090)), WSGIMiddleware(None, receiver), server_class=Server).serve_forever()
