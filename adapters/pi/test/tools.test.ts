// The eight memory tools: what pi registers, what pimem is asked and what the agent reads.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ToolResult } from "../src/pi.ts";
import { setup } from "./harness.ts";

/** The schema as JSON (what pi sends to the model), without the descriptions. */
function shape(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema), (key, value) => (key === "description" ? undefined : value));
}

const EMPTY_OBJECT = { type: "object", properties: {} };

const SCHEMAS: Record<string, unknown> = {
  memory_search: {
    type: "object",
    required: ["query"],
    properties: {
      query: { type: "string", minLength: 1, pattern: "\\S" },
      scope: { type: "string", enum: ["project", "all"] },
      top_k: { type: "integer", minimum: 1 },
    },
  },
  memory_expand: {
    type: "object",
    required: ["chunk_hash"],
    properties: { chunk_hash: { type: "string" }, project: { type: "string" } },
  },
  memory_transcript: {
    type: "object",
    required: ["transcript_path"],
    properties: {
      transcript_path: { type: "string" },
      turn: { type: "string" },
      context: { type: "integer", minimum: 0 },
      limit: { type: "integer", minimum: 1 },
    },
  },
  memory_write: { type: "object", required: ["content"], properties: { content: { type: "string" } } },
  memory_forget: {
    type: "object",
    properties: { chunk_hash: { type: "string" }, date: { type: "string" }, time: { type: "string" } },
  },
  memory_compact: EMPTY_OBJECT,
  memory_status: EMPTY_OBJECT,
  memory_skills: {
    type: "object",
    required: ["action"],
    properties: {
      action: { type: "string", enum: ["list", "show", "install"] },
      name: { type: "string" },
      to: { type: "string" },
    },
  },
};

describe("tool registration", () => {
  test("exactly the eight memory tools are registered", (t) => {
    const s = setup(t);
    assert.deepEqual([...s.pi.tools.keys()].sort(), Object.keys(SCHEMAS).sort());
  });

  test("each tool has a label and a one-line description, said once: no prompt snippet", (t) => {
    const s = setup(t);
    for (const tool of s.pi.tools.values()) {
      assert.ok(tool.label.trim(), `${tool.name} label`);
      assert.ok(tool.description.trim(), `${tool.name} description`);
      assert.ok(!tool.description.includes("\n"), `${tool.name} description is one line`);
      // A snippet would list the tool again in pi's "Available tools", in every request.
      assert.equal(tool.promptSnippet, undefined, `${tool.name} promptSnippet`);
    }
  });

  test("the eight definitions stay short: every request carries them", (t) => {
    const s = setup(t);
    const sent = [...s.pi.tools.values()].map(({ name, description, parameters }) => ({
      name,
      description,
      parameters,
    }));
    // 4,927 characters before issue 38 halved what pimem adds to a request.
    assert.ok(JSON.stringify(sent).length <= 2600, `${JSON.stringify(sent).length} characters`);
  });

  for (const [name, expected] of Object.entries(SCHEMAS)) {
    test(`${name} takes the documented parameters`, (t) => {
      const s = setup(t);
      assert.deepEqual(shape(s.pi.tool(name).parameters), expected);
    });
  }
});

describe("tool calls", () => {
  test("the agent reads pimem's text; the rest of the answer is the details", async (t) => {
    const hits = [{ chunk_hash: "abc", score: 0.9 }];
    const s = setup(t, { script: { answers: { "memory.search": { text: "1 hit: abc", hits } } } });
    await s.startSession();
    const result = await s.callTool("memory_search", { query: "database choice", scope: "all", top_k: 3 });
    assert.deepEqual(result, { content: [{ type: "text", text: "1 hit: abc" }], details: { hits } });
    assert.deepEqual(s.requests().at(-1)!.params, { query: "database choice", scope: "all", top_k: 3 });
  });

  test("each tool calls its own method", async (t) => {
    const s = setup(t);
    await s.startSession();
    const calls: [string, Record<string, unknown>, string][] = [
      ["memory_expand", { chunk_hash: "abc" }, "memory.expand"],
      ["memory_transcript", { transcript_path: "/s.jsonl", turn: "e1" }, "memory.transcript"],
      ["memory_forget", { date: "2025-01-02", time: "10:30" }, "memory.forget"],
      ["memory_compact", {}, "memory.compact"],
      ["memory_status", {}, "memory.status"],
      ["memory_skills", { action: "install", name: "run-tests", to: ".pi/skills" }, "memory.skills"],
    ];
    for (const [tool, args, method] of calls) {
      const result = await s.callTool(tool, args);
      assert.deepEqual(result.content, [{ type: "text", text: `${method} done` }], tool);
      const request = s.requests().at(-1)!;
      assert.equal(request.method, method);
      assert.deepEqual(request.params, args);
    }
  });

  test("memory_search refuses an empty or blank query without asking pimem", async (t) => {
    const s = setup(t);
    await s.startSession();
    const before = s.requests().length;
    for (const query of ["", "   ", "\n\t"]) {
      await assert.rejects(s.callTool("memory_search", { query }), /memory_search needs a query/);
    }
    assert.equal(s.requests().length, before);
  });

  test("memory_write adds the session's leaf id as turn", async (t) => {
    const s = setup(t);
    await s.startSession();
    s.ctx.leaf = "entry-17";
    await s.callTool("memory_write", { content: "- uses Postgres" });
    assert.deepEqual(s.requests().at(-1)!.params, { content: "- uses Postgres", turn: "entry-17" });
  });

  test("memory_write without a leaf id sends turn null", async (t) => {
    const s = setup(t, { context: { leafId: null } });
    await s.startSession();
    await s.callTool("memory_write", { content: "- x" });
    assert.deepEqual(s.requests().at(-1)!.params, { content: "- x", turn: null });
  });

  test("an `unavailable` error is a normal result carrying the install message", async (t) => {
    const message = "memsearch is not installed: pip install 'memsearch[onnx]'";
    const s = setup(t, { script: { errors: { "memory.search": { type: "unavailable", message } } } });
    await s.startSession();
    const result = await s.callTool("memory_search", { query: "q" });
    assert.deepEqual(result.content, [{ type: "text", text: message }]);
  });

  test("a message that names the failed operation is not prefixed again", async (t) => {
    const message = "memory search failed: another process kept the Milvus Lite database open";
    const s = setup(t, { script: { errors: { "memory.search": { type: "memory", message } } } });
    await s.startSession();
    await assert.rejects(s.callTool("memory_search", { query: "q" }), (error: Error) => {
      assert.equal(error.message, message);
      return true;
    });
  });

  test("other errors throw, naming the tool and carrying pimem's message", async (t) => {
    const s = setup(t, {
      script: { errors: { "memory.forget": { type: "memory", message: "no entry at 2025-01-02 10:30" } } },
    });
    await s.startSession();
    await assert.rejects(s.callTool("memory_forget", { date: "2025-01-02", time: "10:30" }), (error: Error) => {
      assert.equal(error.message, "memory_forget failed: no entry at 2025-01-02 10:30");
      return true;
    });
  });

  test("progress lines reach onUpdate before the answer", async (t) => {
    const s = setup(t, {
      script: {
        progress: { "memory.compact": ["waiting for indexing", "waiting for the backend"] },
        answers: { "memory.compact": { text: "compacted", summary: "S" } },
      },
    });
    await s.startSession();
    const updates: ToolResult[] = [];
    const result = await s.callTool("memory_compact", {}, (partial) => updates.push(partial));
    assert.deepEqual(updates, [
      { content: [{ type: "text", text: "waiting for indexing" }], details: {} },
      { content: [{ type: "text", text: "waiting for the backend" }], details: {} },
    ]);
    assert.deepEqual(result, { content: [{ type: "text", text: "compacted" }], details: { summary: "S" } });
  });

  test("an aborted tool call rejects without waiting for pimem", async (t) => {
    const s = setup(t, { script: { delays: { "memory.search": 30_000 } } });
    await s.startSession();
    const controller = new AbortController();
    const call = s.pi.tool("memory_search").execute("call-1", { query: "q" }, controller.signal, undefined, s.ctx);
    await s.waitForLog((entry) => entry.method === "memory.search");
    controller.abort();
    await assert.rejects(call, /memory_search failed: memory\.search was cancelled/);
  });

  test("with timing on, each call is timed under its tool's name, answered or failed", async (t) => {
    const steps: string[] = [];
    const s = setup(t, { timing: (step) => steps.push(step) });
    await assert.rejects(s.callTool("memory_status"), /memory is not started/);
    await s.startSession();
    await s.callTool("memory_search", { query: "q" });
    assert.deepEqual(
      steps.filter((step) => step.startsWith("memory_")),
      ["memory_status", "memory_search"],
    );
  });

  test("a tool call before session_start says memory is not started", async (t) => {
    const s = setup(t);
    await assert.rejects(s.callTool("memory_status"), /memory_status failed: memory is not started/);
    assert.equal(s.children.length, 0);
  });
});
