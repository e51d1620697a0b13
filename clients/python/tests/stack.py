"""The Python client against a real hookflow (e2e/python_client_test.go
runs it with HOOKFLOW_URL, HOOKFLOW_API_KEY and HOOKFLOW_PREFIX): publishes
an event, reads it back until delivered, lists it by its correlation, and
gets an invalid event back as a typed problem. Prints what it saw as JSON.
Not collected by pytest (no test_ prefix): it needs the stack."""

import json
import os
import time

from hookflow import Client, ProblemError

prefix = os.environ["HOOKFLOW_PREFIX"]
with Client(os.environ["HOOKFLOW_URL"], os.environ["HOOKFLOW_API_KEY"]) as hf:
    ev_id, corr = f"{prefix}-py-1", f"{prefix}-py"
    accepted = hf.send({"id": ev_id, "correlation_id": corr, "sequence": 1, "type": "order.paid", "data": {"amount": 42}})
    deadline = time.monotonic() + 120
    ev = hf.event_get(ev_id)
    while ev["state"] != "delivered" and time.monotonic() < deadline:
        time.sleep(0.2)
        ev = hf.event_get(ev_id)
    listed = [e["id"] for e in hf.event_list(correlation_id=corr)["items"]]
    again = hf.send({"id": ev_id, "correlation_id": corr, "sequence": 1, "type": "order.paid", "data": {"amount": 42}})
    try:
        hf.send({"id": f"{prefix}-py-bad", "correlation_id": corr, "sequence": 0, "type": "order.paid", "data": {}})
        invalid = None
    except ProblemError as e:
        invalid = {"status": e.status, "type": e.type, "field": e.problem.get("field")}
    print(json.dumps({"accepted": accepted["id"], "state": ev["state"], "type": ev["type"], "listed": listed,
                      "again": again["state"], "invalid": invalid}, sort_keys=True))
