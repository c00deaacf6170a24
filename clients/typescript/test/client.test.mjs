// The client against a live memsys serve (tests/test_typescript_client.py starts one and sets these):
// MEMSYS_URL, MEMSYS_KEY (a tenant's key), MEMSYS_OTHER_KEY (another tenant's), MEMSYS_SEEDED_USER (a user whose
// message the Python side stored over plain HTTP). Run: npx tsc && node --test test/
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  InvalidParameterError,
  MemsysClient,
  MemsysConnectionError,
  MemsysError,
  NotFoundError,
  UnauthorizedError,
} from "../dist/index.js";

const baseUrl = process.env.MEMSYS_URL;
const memsys = new MemsysClient({ baseUrl, apiKey: process.env.MEMSYS_KEY });
const other = new MemsysClient({ baseUrl, apiKey: process.env.MEMSYS_OTHER_KEY });

async function eventually(check, what) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) assert.fail(`not within 30 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

test("memorize, retrieve, context and flush round-trip; the other tenant sees nothing", async () => {
  const stored = await memsys.memorize({
    message_id: "ts-1",
    create_time: new Date(),
    sender: "ts-ana",
    content: "I am training for the Lisbon marathon in October",
  });
  assert.equal(stored.status_info, "accumulated");
  const again = await memsys.memorize({
    message_id: "ts-1",
    create_time: new Date(),
    sender: "ts-ana",
    content: "I am training for the Lisbon marathon in October",
  });
  assert.equal(again.status_info, "duplicate");

  const found = await memsys.retrieveLightweight({ query: "Lisbon marathon", user_id: "ts-ana", data_source: "event_log" });
  assert.equal(found.count, 1);
  assert.equal(found.memories[0].content, "ts-ana: I am training for the Lisbon marathon in October");
  assert.equal(found.memories[0].formed, false);
  const hidden = await other.retrieveLightweight({ query: "Lisbon marathon", user_id: "ts-ana", data_source: "event_log" });
  assert.equal(hidden.count, 0);

  const context = await eventually(async () => {
    const assembled = await memsys.context({ query: "Which race am I training for?", user_id: "ts-ana" });
    return assembled.messages.some((m) => m.content.includes("Lisbon marathon")) && assembled;
  }, "the message in the context's knowledge");
  assert.equal(context.messages.at(-1).content, "Which race am I training for?");
  assert.ok(context.total_tokens > 0 && context.sections.knowledge.sources.length === 1);

  const flushed = await memsys.flush({ sender: "ts-ana" });
  assert.equal(flushed.status_info, "extracted");
  assert.ok(flushed.saved_memories.length > 0);
  const formed = await memsys.retrieveLightweight({ query: "Lisbon marathon", user_id: "ts-ana" });
  assert.ok(formed.memories.some((m) => m.memory_type === "episode" && m.formed));
});

test("what was stored over plain HTTP is found through the client", async () => {
  const user = process.env.MEMSYS_SEEDED_USER;
  const found = await memsys.retrieveLightweight({ query: "sourdough", user_id: user, data_source: "event_log" });
  assert.deepEqual(
    found.memories.map((m) => m.content),
    [`${user}: My sourdough starter is called Bubbles`],
  );
});

test("forget removes a user's messages and memories", async () => {
  await memsys.memorize({ message_id: "ts-f1", create_time: "2025-05-01T10:00:00Z", sender: "ts-gone", content: "My locker code is 4417" });
  const forgotten = await memsys.forgetUser("ts-gone");
  assert.equal(forgotten.user_id, "ts-gone");
  assert.equal(forgotten.deleted.messages, 1);
  const found = await memsys.retrieveLightweight({ query: "locker code", user_id: "ts-gone", data_source: "event_log" });
  assert.equal(found.count, 0);
  const group = await memsys.forgetGroup("ts-no-such-group");
  assert.equal(group.group_id, "ts-no-such-group");
});

test("one memory is read, corrected, deleted and restored, with its history", async () => {
  await memsys.memorize({ message_id: "ts-l1", create_time: "2025-05-01T10:00:00Z", sender: "ts-lena", content: "I live in Oslo and I love skiing" });
  await memsys.flush({ sender: "ts-lena" });
  const found = await memsys.retrieveLightweight({ query: "Where does Lena live?", user_id: "ts-lena", data_source: "semantic_memory" });
  const id = found.memories[0].id;
  assert.equal((await memsys.getMemory(id)).memory.status, "current");
  const edited = await memsys.editMemory(id, { content: "ts-lena lives in Bergen." });
  assert.equal(edited.memory.content, "ts-lena lives in Bergen.");
  await memsys.deleteMemory(id);
  assert.equal((await memsys.getMemory(id)).memory.status, "deleted");
  await memsys.restoreMemory(id);
  const events = (await memsys.memoryHistory(id)).events.map((e) => e.event).filter((e) => e !== "reembedded");
  assert.deepEqual(events, ["formed", "edited", "deleted", "restored"]);
  await assert.rejects(other.getMemory(id), (error) => error instanceof NotFoundError);
});

test("your metadata and scopes are carried to the memories, and filters find them", async () => {
  const said = [
    ["ts-m1", "support", "My invoice for March was charged twice"],
    ["ts-m2", "sales", "I would like a quote for forty seats"],
  ];
  for (const [message_id, channel, content] of said) {
    await memsys.memorize({
      message_id,
      create_time: "2025-06-01T10:00:00Z",
      sender: "ts-meta",
      content,
      metadata: { channel, tags: ["ts"] },
      app_id: "ts-app",
    });
  }
  await memsys.flush({ sender: "ts-meta" });
  const question = { query: "invoice charged twice quote seats", user_id: "ts-meta", data_source: "event_log" };
  const support = await memsys.retrieveLightweight({ ...question, filters: { channel: "support", app_id: "ts-app" } });
  assert.ok(support.count >= 1);
  assert.ok(support.memories.every((m) => m.content.includes("invoice")));
  const either = await memsys.retrieveLightweight({
    ...question,
    filters: { OR: [{ channel: "sales" }, { channel: { in: ["support"] } }], tags: { contains: "ts" } },
  });
  assert.ok(either.memories.some((m) => m.content.includes("invoice")) && either.memories.some((m) => m.content.includes("quote")));
  const elsewhere = await memsys.retrieveLightweight({ ...question, filters: { app_id: "another-app" } });
  assert.equal(elsewhere.count, 0);
  await assert.rejects(memsys.retrieveLightweight({ ...question, filters: { channel: { like: "s%" } } }), (error) => {
    assert.ok(error instanceof InvalidParameterError);
    assert.match(error.message, /filters\.channel\.like/);
    assert.ok(error.requestId && error.requestId.length > 0);
    return true;
  });
});

test("errors are typed and carry the envelope's code", async () => {
  await assert.rejects(memsys.memorize({ message_id: "x", create_time: "2025-05-01T10:00:00Z", sender: "u" }), (error) => {
    assert.ok(error instanceof InvalidParameterError && error instanceof MemsysError);
    assert.equal(error.status, 400);
    assert.equal(error.code, "INVALID_PARAMETER");
    assert.match(error.message, /content/);
    assert.equal(error.path, "/api/v3/agentic/memorize");
    return true;
  });
  const stranger = new MemsysClient({ baseUrl, apiKey: "not-a-key" });
  await assert.rejects(stranger.retrieveLightweight({ query: "x", user_id: "u" }), (error) => {
    assert.ok(error instanceof UnauthorizedError);
    assert.equal(error.code, "UNAUTHORIZED");
    return true;
  });
  await assert.rejects(memsys.flush({}), (error) => error instanceof InvalidParameterError && /group_id/.test(error.message));
  const wrongPath = new MemsysClient({ baseUrl: `${baseUrl}/nowhere`, apiKey: process.env.MEMSYS_KEY });
  await assert.rejects(wrongPath.flush({ sender: "u" }), (error) => error instanceof NotFoundError && error.code === "NOT_FOUND");
  const away = new MemsysClient({ baseUrl: "http://127.0.0.1:9", maxRetries: 1 });
  await assert.rejects(away.flush({ sender: "u" }), (error) => {
    assert.ok(error instanceof MemsysConnectionError);
    assert.equal(error.code, "CONNECTION_ERROR");
    assert.equal(error.status, 0);
    return true;
  });
});
