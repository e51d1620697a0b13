"""hookflow-receiver: the receiving half of hookflow's exactly-once,
in-order delivery for Python on PostgreSQL (psycopg 3), as WSGI and ASGI
middleware. See README.md."""

from .asgi import ASGIMiddleware
from .receiver import Answer, Event, Receiver, Rejected, decode_event
from .sql import migrate, pending_migrations
from .webhook import DEFAULT_TOLERANCE_SECONDS, VerificationError, decode_secret, sign, verify
from .wsgi import WSGIMiddleware

__version__ = "0.1.0"

__all__ = [
    "ASGIMiddleware", "Answer", "DEFAULT_TOLERANCE_SECONDS", "Event", "Receiver", "Rejected", "VerificationError",
    "WSGIMiddleware", "decode_event", "decode_secret", "migrate", "pending_migrations", "sign", "verify",
]
