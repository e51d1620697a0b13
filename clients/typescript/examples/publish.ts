import { createHookflowClient, send } from "@hookflow/client";

const hf = createHookflowClient({
  baseUrl: process.env.HOOKFLOW_URL ?? "http://127.0.0.1:8080", token: process.env.HOOKFLOW_API_KEY ?? "dev-token",
});
const answer = await send(hf, { // a problem answer throws a ProblemError; a 429 is retried after its Retry-After
  id: "order-42-paid", correlation_id: "order-42", sequence: 1, type: "order.paid", data: { amount: 4200 },
});
console.log(answer.id, answer.state); // order-42-paid waiting: on its way to every endpoint subscribed to order.paid
