// `/recall` without a query shows its usage and sends nothing; with one it is left to pi, which
// expands the template (prompts/recall.md).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { RECALL_SYNTAX, RECALL_USAGE, isBareRecall } from "../src/commands.ts";
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

  test("a query, or any other input, is left to pi untouched and nothing is shown", async (t) => {
    const s = setup(t, { context: { hasUI: true } });
    for (const text of [...QUERIES, ...OTHERS]) {
      assert.deepEqual(await s.pi.fire("input", input(text), s.ctx), [undefined], text);
    }
    assert.deepEqual(s.ctx.notices, []);
    assert.deepEqual(s.stderr, []);
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
