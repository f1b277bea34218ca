// pimem's `complete` requests, answered with pi's model registry and the injected completion.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ModelInfo } from "../src/pi.ts";
import { setup } from "./harness.ts";

const SMALL: ModelInfo = { provider: "anthropic", id: "claude-small", cost: { input: 1, output: 5 } };
const OTHER: ModelInfo = { provider: "openai", id: "gpt-other" };

const COMPLETE = { model: { provider: "anthropic", id: "claude-small" }, system: "SYSTEM", prompt: "PROMPT", timeout_ms: 5_000 };

describe("host completion", () => {
  test("pi's model module is loaded after the agent's request to its model goes out, not at start-up", async (t) => {
    let prepared = 0;
    const s = setup(t, { prepareComplete: () => prepared++ });
    await s.startSession();
    assert.equal(prepared, 0);
    const results = await s.pi.fire("before_provider_request", { payload: { model: "m" } }, s.ctx);
    assert.ok(results.every((result) => result === undefined), "the request is sent as pi made it");
    assert.equal(prepared, 0, "not before the request is on its way");
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(prepared, 1);
  });

  test("the registry's model and credentials run the completion, and pimem gets {text}", async (t) => {
    const s = setup(t, {
      script: { complete: COMPLETE },
      context: { models: [OTHER, SMALL], credentials: { ok: true, apiKey: "sk-test", headers: { "x-h": "v" } } },
      complete: async () => "- distilled bullet",
    });
    await s.startSession();
    const answer = await s.waitForLog((entry) => entry.kind === "host-answer");
    assert.deepEqual(answer.message, { id: "pimem-1", result: { text: "- distilled bullet" } });

    assert.equal(s.completions.length, 1);
    const [request] = s.completions;
    assert.equal(request!.model, SMALL, "the registry's own model object");
    assert.equal(request!.system, "SYSTEM");
    assert.equal(request!.prompt, "PROMPT");
    assert.equal(request!.apiKey, "sk-test");
    assert.deepEqual(request!.headers, { "x-h": "v" });
    assert.ok(request!.signal instanceof AbortSignal);
  });

  test("a model that is not in the registry gets an error reply naming it", async (t) => {
    const s = setup(t, {
      script: { complete: { ...COMPLETE, model: { provider: "nope", id: "missing" } } },
      context: { models: [SMALL] },
    });
    await s.startSession();
    const answer = await s.waitForLog((entry) => entry.kind === "host-answer");
    assert.deepEqual(answer.message, {
      id: "pimem-1",
      error: { type: "host", message: "model nope/missing is not in pi's model registry" },
    });
    assert.equal(s.completions.length, 0);
  });

  test("missing credentials get an error reply", async (t) => {
    const s = setup(t, {
      script: { complete: COMPLETE },
      context: { models: [SMALL], credentials: { ok: false, error: "no API key for anthropic" } },
    });
    await s.startSession();
    const answer = await s.waitForLog((entry) => entry.kind === "host-answer");
    assert.deepEqual(answer.message, { id: "pimem-1", error: { type: "host", message: "no API key for anthropic" } });
    assert.equal(s.completions.length, 0);
  });

  test("a failing completion gets an error reply with its message", async (t) => {
    const s = setup(t, {
      script: { complete: COMPLETE },
      context: { models: [SMALL] },
      complete: async () => {
        throw new Error("rate limited");
      },
    });
    await s.startSession();
    const answer = await s.waitForLog((entry) => entry.kind === "host-answer");
    assert.deepEqual(answer.message, { id: "pimem-1", error: { type: "host", message: "rate limited" } });
  });
});
