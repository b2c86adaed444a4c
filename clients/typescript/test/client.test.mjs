// The TypeScript client against a real `deltamem serve` (started by
// tests/server/test_typescript_client.py, which passes its URL and an admin key), with node's
// own test runner. A flaky proxy (a test double on loopback) checks retries and Retry-After.
import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";

import { Client, DeltaMemError, retryAfter } from "../dist/index.js";

const URL_ = process.env.DELTAMEM_URL;
const KEY = process.env.DELTAMEM_KEY;
if (!URL_ || !KEY) throw new Error("DELTAMEM_URL and DELTAMEM_KEY must name a running server");

const KITCHEN = "a kitchen with a fridge, a microwave and a table";
const episode = (actions, success = true) => ({
  task: "heat the apple",
  env: KITCHEN,
  success,
  steps: actions.map((action) => ({ action, observation: `You ${action}.` })),
});

test("the facade's vocabulary, typed answers", async () => {
  const mem = new Client(URL_, { apiKey: KEY, space: "ts" });
  // A space nobody wrote to reads as empty (it was a 404), as in the library.
  const empty = await mem.recall({ task: "heat the apple" });
  assert.equal(empty.task.matched, false);
  assert.equal(empty.context, "");
  const first = await mem.learn({ ...episode(["go to kitchen", "take apple", "heat apple"]), meta: { user: "alice" } });
  assert.equal(first.task.action, "root");
  const batch = await mem.learnMany([episode(["go to kitchen", "open microwave", "take apple", "heat apple"])]);
  assert.equal(batch.results[0].task.action, "delta");

  const recall = await mem.recall({ task: "heat the apple", env: KITCHEN, explain: true });
  assert.ok(recall.task.matched && recall.task.node);
  assert.ok(recall.context.includes("open microwave"));
  assert.ok(recall.explain);

  // Metadata filters: only the nodes of alice's episode (the batch's delta has no meta).
  const mine = await mem.recall({ task: "heat the apple", env: KITCHEN, filters: { user: "alice" } });
  assert.equal(mine.task.node, first.task.node);
  assert.equal((await mem.recall({ task: "heat the apple", filters: { user: "bob" } })).task.matched, false);
  const alices = await mem.listNodes({ filters: ["user=alice"] });
  assert.deepEqual(alices.nodes.map((n) => n.id).sort(), [first.task.node, first.env.node].sort());

  const shown = await mem.show(recall.task.node);
  assert.equal(shown.id, recall.task.node);
  const listed = await mem.listNodes({ tree: "task", kind: "delta" });
  assert.equal(listed.total, 1);
  assert.ok((await mem.stats()).task.nodes >= 2);
  const counted = await mem.recordOutcome({ nodes: [recall.task.node], success: true });
  assert.deepEqual(counted.nodes, [recall.task.node]);
  const due = await mem.consolidate({ dry_run: true });
  assert.ok(due.dry_run && Array.isArray(due.consolidated));

  const lines = await mem.exportLines();
  assert.ok(lines.length > 2 && JSON.parse(lines[0]).format === "deltamem-export");
  const copy = new Client(URL_, { apiKey: KEY, space: "ts-copy" });
  const imported = await copy.importLines(lines);
  assert.ok(imported.nodes >= 2);
  assert.equal((await copy.exportLines()).length, lines.length);

  const corrected = await mem.correct(first.task.node, { steps: ["take apple", "heat apple"], reason: "shorter" });
  assert.equal(corrected.of, first.task.node);
  assert.equal(corrected.kind, "steps");

  const deleted = await mem.delete(listed.nodes[0].id);
  assert.deepEqual(deleted.deleted, [listed.nodes[0].id]);
  assert.ok((await copy.forget()).deleted_nodes >= 2);
});

test("server errors arrive as DeltaMemError with the server's type", async () => {
  const mem = new Client(URL_, { apiKey: KEY, space: "ts-errors" });
  await mem.learn(episode(["look"]));
  await assert.rejects(mem.show("t-0000000000000000"), (error) => {
    assert.ok(error instanceof DeltaMemError);
    assert.equal(error.status, 404);
    assert.equal(error.type, "NodeNotFound");
    return true;
  });
  await assert.rejects(mem.learn({ task: "x", success: true, steps: [{ observation: "no action" }] }), (error) => error.status === 422 && error.field !== null);
  const anonymous = new Client(URL_, { space: "ts" });
  await assert.rejects(anonymous.stats(), (error) => error.status === 401 && error.type === "Unauthorized");
});

/** A proxy that answers `script` (status + headers per request) first, then forwards. */
function flakyProxy(script) {
  const seen = [];
  const server = http.createServer(async (request, response) => {
    const chunks = [];
    for await (const chunk of request) chunks.push(chunk);
    seen.push({ at: Date.now(), path: request.url });
    const step = script.shift();
    if (step) {
      response.writeHead(step.status, { "Content-Type": "application/json", ...step.headers });
      response.end(JSON.stringify({ error: { type: "Unavailable", message: "scripted failure" } }));
      return;
    }
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const answer = await fetch(URL_ + request.url, {
      method: request.method,
      headers: { authorization: request.headers.authorization ?? "", "content-type": request.headers["content-type"] ?? "" },
      body,
    });
    response.writeHead(answer.status, { "Content-Type": answer.headers.get("content-type") ?? "" });
    response.end(Buffer.from(await answer.arrayBuffer()));
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, seen, url: `http://127.0.0.1:${server.address().port}` })));
}

test("reads retry through 503 and wait for Retry-After", async () => {
  const proxy = await flakyProxy([{ status: 503, headers: {} }, { status: 429, headers: { "Retry-After": "1" } }]);
  try {
    const mem = new Client(proxy.url, { apiKey: KEY, space: "ts-retry", retries: { retries: 3, backoff: 0.01 } });
    await new Client(URL_, { apiKey: KEY, space: "ts-retry" }).learn(episode(["look"]));
    const stats = await mem.stats();
    assert.ok(stats.task.nodes >= 1);
    assert.equal(proxy.seen.length, 3);
    assert.ok(proxy.seen[2].at - proxy.seen[1].at >= 950, "Retry-After: 1 was waited for");
  } finally {
    proxy.server.close();
  }
});

test("a write is not sent twice after a 503, but is after a rate limit's 429", async () => {
  const proxy = await flakyProxy([{ status: 503, headers: {} }, { status: 429, headers: { "Retry-After": "0" } }]);
  try {
    const mem = new Client(proxy.url, { apiKey: KEY, space: "ts-write", retries: { retries: 3, backoff: 0.01 } });
    await assert.rejects(mem.learn(episode(["look"])), (error) => error.status === 503);
    assert.equal(proxy.seen.length, 1);
    const learned = await mem.learn(episode(["look"]));
    assert.equal(learned.task.action, "root");
    assert.equal(proxy.seen.length, 3);
  } finally {
    proxy.server.close();
  }
});

test("retries: 0 gives up at once; a dead server fails with one message", async () => {
  const proxy = await flakyProxy([{ status: 503, headers: {} }]);
  try {
    const mem = new Client(proxy.url, { apiKey: KEY, space: "ts", retries: 0 });
    await assert.rejects(mem.stats(), (error) => error.status === 503);
    assert.equal(proxy.seen.length, 1);
  } finally {
    proxy.server.close();
  }
  const dead = new Client("http://127.0.0.1:9", { retries: { retries: 2, backoff: 0.01 } });
  await assert.rejects(dead.stats(), (error) => error instanceof DeltaMemError && error.status === undefined && /after 3 attempts/.test(error.message));
});

test("Retry-After reads seconds and HTTP dates", () => {
  assert.equal(retryAfter("7"), 7);
  assert.equal(retryAfter(null), undefined);
  assert.equal(retryAfter("soon"), undefined);
  const now = Date.parse("Wed, 21 Oct 2015 07:28:00 GMT");
  assert.equal(retryAfter("Wed, 21 Oct 2015 07:30:00 GMT", now), 120);
  assert.equal(retryAfter("Wed, 21 Oct 2015 07:00:00 GMT", now), 0);
});
