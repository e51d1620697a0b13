"""hookflow: a Python client for hookflow's API. The operations and types
are generated from the API's OpenAPI document (hookflow._generated, by
clients/python/generate.py); the client adds a bearer token, a retry of
429s after Retry-After and typed RFC 9457 problems. See README.md."""

from ._generated import *  # noqa: F401,F403 - the API's types
from .client import Client, ProblemError

__version__ = "0.1.0"
