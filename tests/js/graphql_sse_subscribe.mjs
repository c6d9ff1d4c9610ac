// Subscribe with graphql-sse's client (distinct connections mode, the default) under Node.
// Usage: node graphql_sse_subscribe.mjs <url> <token> <count> <query>
// Prints a JSON line {"connected": true} once the subscription's stream is open, then, after `count` results or the
// subscription's end, {"results": [...], "completed": bool, "error": string|null}.
import { createClient } from "graphql-sse";

const [url, token, countText, query] = process.argv.slice(2);
const count = Number(countText);
const results = [];

const client = createClient({ url, headers: { "x-service-api-org": token }, retryAttempts: 0 });
const timer = setTimeout(() => finish(false, "timed out"), 60000);

function finish(completed, error) {
  clearTimeout(timer);
  console.log(JSON.stringify({ results, completed, error }));
  dispose();
  client.dispose();
}

const dispose = client.subscribe({ query }, {
  next(result) {
    results.push(result);
    if (results.length === count) finish(false, null);
  },
  error(error) { finish(false, String(error)); },
  complete() { finish(true, null); },
}, { connected() { console.log(JSON.stringify({ connected: true })); } });
