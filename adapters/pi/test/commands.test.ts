// `/recall` without a query shows its usage and sends nothing; with one, pi sends the query as
// the user's message and the instruction to answer it from memory beside it, hidden; while the
// agent works it is left to pi, which expands the template (prompts/recall.md).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import {
  RECALL_EVERYWHERE,
  RECALL_INSTRUCTION,
  RECALL_SYNTAX,
  RECALL_USAGE,
  isBareRecall,
  parseRecall,
} from "../src/commands.ts";
import { HIDDEN_MESSAGE_TYPE } from "../src/extension.ts";
import { setup } from "./harness.ts";

const TEMPLATE = join(import.meta.dirname, "..", "prompts", "recall.md");

const BARE = [
  "/recall",
  "/recall ",
  "/recall   \t ",
  "/recall\n",
  "/recall --all",
  "/recall  --all  ",
  '/recall ""',
  "/recall --all ''",
  "/recall '--all'",
];
const QUERIES = ["/recall redis", "/recall --all redis cache", "/recall  why the login loops ", '/recall "cache ttl"'];
const OTHERS = ["recall", "/recalls", "/recall-x", "/skill:recall", " /recall", "what does /recall do?"];

const input = (text: string) => ({ type: "input", text, source: "interactive" });

describe("/recall", () => {
  test("nothing to look for: the input is handled and the user sees the usage on stderr (no UI)", async (t) => {
    const s = setup(t);
    for (const text of BARE) {
      assert.deepEqual(await s.pi.fire("input", input(text), s.ctx), [{ action: "handled" }], text);
    }
    assert.deepEqual(s.stderr, BARE.map(() => `pimem: ${RECALL_USAGE}`));
    assert.deepEqual(s.ctx.notices, []);
    assert.equal(s.children.length, 0, "the usage needs no bridge");
  });

  test("with a UI the usage is a pi notification, not a stderr line", async (t) => {
    const s = setup(t, { context: { hasUI: true } });
    assert.deepEqual(await s.pi.fire("input", input("/recall"), s.ctx), [{ action: "handled" }]);
    assert.deepEqual(s.ctx.notices, [{ message: `pimem: ${RECALL_USAGE}`, level: "warning" }]);
    assert.deepEqual(s.stderr, []);
  });

  test("a query becomes the user's message; any other input is left to pi untouched", async (t) => {
    const s = setup(t, { context: { hasUI: true } });
    const queries = ["redis", "redis cache", "why the login loops", '"cache ttl"'];
    for (const [index, text] of QUERIES.entries()) {
      const result = await s.pi.fire("input", input(text), s.ctx);
      assert.deepEqual(result, [{ action: "transform", text: queries[index] }], text);
    }
    for (const text of OTHERS) assert.deepEqual(await s.pi.fire("input", input(text), s.ctx), [undefined], text);
    assert.deepEqual(s.ctx.notices, []);
    assert.deepEqual(s.stderr, []);
  });

  test("the model gets the instruction beside the query, hidden from the user, with or without memory", async (t) => {
    const s = setup(t, { script: { answers: { "session.before_prompt": { snapshot: "SNAP", hidden: [{ text: "HITS" }] } } } });
    await s.startSession();
    await s.pi.fire("input", input("/recall --all which cache"), s.ctx);
    const result = (await s.prompt("which cache")) as { systemPrompt: string; message: Record<string, unknown> };
    assert.equal(result.systemPrompt, "BASE\n\nSNAP");
    assert.deepEqual(result.message, {
      customType: HIDDEN_MESSAGE_TYPE,
      content: `${RECALL_INSTRUCTION} ${RECALL_EVERYWHERE}\n\nHITS`,
      display: false,
    });
    // Once only, and only for the query itself.
    const next = (await s.prompt("which cache")) as { message: Record<string, unknown> };
    assert.equal(next.message.content, "HITS");
    await s.pi.fire("input", input("/recall redis"), s.ctx);
    const other = (await s.prompt("something else")) as { message: Record<string, unknown> };
    assert.equal(other.message.content, "HITS");
  });

  test("without a bridge the instruction still goes", async (t) => {
    const s = setup(t, { command: "/nonexistent/pimem" });
    await s.pi.fire("session_start", { type: "session_start" }, s.ctx);
    await s.pi.fire("input", input("/recall redis"), s.ctx);
    const result = (await s.prompt("redis")) as { message: Record<string, unknown> };
    assert.equal(result.message.content, RECALL_INSTRUCTION);
  });

  test("while the agent works, the input is left to the template", async (t) => {
    const s = setup(t);
    const busy = { ...s.ctx, isIdle: () => false };
    assert.deepEqual(await s.pi.fire("input", input("/recall redis"), busy), [undefined]);
    assert.deepEqual(await s.pi.fire("input", input("/recall"), busy), [{ action: "handled" }]);
  });

  test("parseRecall takes --all off the front only", () => {
    assert.deepEqual(parseRecall("/recall --all redis cache"), { query: "redis cache", all: true });
    assert.deepEqual(parseRecall("/recall redis --all"), { query: "redis --all", all: false });
    assert.deepEqual(parseRecall("/recall --allow x"), { query: "--allow x", all: false });
    assert.equal(parseRecall("/recalls x"), undefined);
  });

  test("isBareRecall tells the two apart", () => {
    for (const text of BARE) assert.equal(isBareRecall(text), true, text);
    for (const text of [...QUERIES, ...OTHERS]) assert.equal(isBareRecall(text), false, text);
  });

  test("the usage shows the syntax the template's argument hint announces", () => {
    const template = readFileSync(TEMPLATE, "utf8");
    const hint = /^argument-hint: "(.*)"$/m.exec(template)?.[1];
    assert.equal(RECALL_SYNTAX, `/recall ${hint}`);
    assert.ok(RECALL_USAGE.includes(RECALL_SYNTAX));
  });
});
