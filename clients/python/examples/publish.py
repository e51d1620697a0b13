import os

from hookflow import Client

with Client(os.environ["HOOKFLOW_URL"], os.environ["HOOKFLOW_API_KEY"]) as hf:
    ev = hf.send({"id": "order-57-paid", "correlation_id": "order-57", "sequence": 1,
                  "type": "order.paid", "data": {"amount": 4200}})
    print(ev["id"], ev["state"])
