// pi's events -> pimem's session lifecycle: when the bridge starts, what it is told, what the
// prompt gets back and when capture is flushed.

import assert from "node:assert/strict";
import { realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { describe, test } from "node:test";
import {
  HIDDEN_MESSAGE_TYPE,
  PRINT_EXIT_CAPTURE_WAIT_MS,
  PRINT_SAVING,
  SWITCH_CAPTURE_WAIT_MS,
} from "../src/extension.ts";
import { exited, fakeContext, killAndWait, poll, setup } from "./harness.ts";

describe("event wiring", () => {
  test("creating the extension spawns nothing; session_start does", async (t) => {
    const s = setup(t);
    assert.equal(s.children.length, 0);
    assert.equal(s.connection.pid, undefined);
    await s.startSession();
    assert.equal(s.children.length, 1);
    assert.deepEqual(s.methods(), ["session.start"]);
  });

  test("a bridge prepared as pi loads the extension serves the session that starts in its directory", async (t) => {
    const s = setup(t);
    s.connection.prepare(s.dir);
    assert.equal(s.children.length, 1);
    const [early] = s.children;
    await s.startSession();
    assert.equal(s.children.length, 1, "no second bridge");
    assert.equal(s.connection.pid, early!.pid);
    assert.deepEqual(s.methods(), ["session.start"]);
    assert.equal((await s.waitForLog((entry) => entry.method === "session.start")).pid, early!.pid);
  });

  test("a prepared bridge in another directory is stopped, and the session gets its own", async (t) => {
    const s = setup(t);
    s.connection.prepare(tmpdir());
    const [early] = s.children;
    await s.startSession();
    assert.equal(s.children.length, 2);
    await exited(early!);
    const started = await s.waitForLog((entry) => entry.method === "session.start");
    assert.equal(started.pid, s.children[1]!.pid);
    assert.equal(s.log().filter((entry) => entry.pid === early!.pid && entry.kind === "request").length, 0);
  });

  test("session_start twice for the same session keeps one bridge (pi 0.73 fires it twice)", async (t) => {
    const s = setup(t, { version: "0.73" });
    await s.startSession();
    await s.startSession();
    assert.equal(s.children.length, 1);
    assert.deepEqual(s.methods(), ["session.start"]);
  });

  test("a new session id shuts the old bridge down and starts a new one", async (t) => {
    const s = setup(t);
    await s.startSession();
    const [first] = s.children;
    await s.startSession(fakeContext({ cwd: s.dir, sessionId: "session-2" }));

    assert.equal(s.children.length, 2);
    await exited(first!);
    assert.equal(first!.exitCode, 0, "the old bridge ended on its own after stdin closed");
    const old = s.log().filter((entry) => entry.pid === first!.pid);
    assert.deepEqual(
      old.map((entry) => entry.method ?? entry.kind),
      ["started", "session.start", "session.shutdown", "eof"],
    );
    const starts = s.requests().filter((entry) => entry.method === "session.start");
    assert.deepEqual(
      starts.map((entry) => entry.params?.session_id),
      ["session-1", "session-2"],
    );
    assert.equal(starts[1]!.pid, s.children[1]!.pid);
  });

  test("session.start carries the session id, cwd, transcript and the model catalog", async (t) => {
    const s = setup(t, {
      context: {
        sessionFile: "/sessions/s1.jsonl",
        model: { provider: "anthropic", id: "claude-big", cost: { input: 3, output: 15 } },
        models: [
          { provider: "anthropic", id: "claude-small", cost: { input: 1, output: 5 } },
          { provider: "local", id: "free-model" },
        ],
      },
    });
    await s.startSession();
    const [start] = s.requests();
    assert.equal(start!.method, "session.start");
    assert.deepEqual(start!.params, {
      session_id: "session-1",
      cwd: s.dir,
      transcript: "/sessions/s1.jsonl",
      model: { provider: "anthropic", id: "claude-big", input_cost: 3, output_cost: 15 },
      models: [
        { provider: "anthropic", id: "claude-small", input_cost: 1, output_cost: 5 },
        { provider: "local", id: "free-model", input_cost: 0, output_cost: 0 },
      ],
    });
  });

  test("an unsaved session (no session file) sends transcript null", async (t) => {
    const s = setup(t, { context: { sessionFile: undefined } });
    await s.startSession();
    assert.equal(s.requests()[0]!.params?.transcript, null);
  });

  test("the bridge runs `serve` in the session's cwd with PYTHONIOENCODING=utf-8", async (t) => {
    const s = setup(t);
    await s.startSession();
    const started = s.log().find((entry) => entry.kind === "started");
    assert.equal(realpathSync(started!.cwd!), realpathSync(s.dir));
    assert.equal(started!.pythonioencoding, "utf-8");
    assert.deepEqual((started as unknown as { argv: string[] }).argv, ["serve"]);
  });
});

describe("before_agent_start", () => {
  test("the snapshot is appended to the system prompt after a blank line", async (t) => {
    const s = setup(t, { script: { answers: { "session.before_prompt": { snapshot: "SNAPSHOT", hidden: [] } } } });
    await s.startSession();
    const result = await s.prompt("what did we decide?", "BASE PROMPT");
    assert.deepEqual(result, { systemPrompt: "BASE PROMPT\n\nSNAPSHOT" });
    assert.deepEqual(s.requests().at(-1)!.params, { prompt: "what did we decide?" });
  });

  test("hidden texts become one hidden pimem-context message", async (t) => {
    const hidden = [
      { text: "first recall", source: "memory/a.md" },
      { text: "", source: "memory/empty.md" },
      { text: "second recall", source: "memory/b.md" },
    ];
    const s = setup(t, { script: { answers: { "session.before_prompt": { snapshot: null, hidden } } } });
    await s.startSession();
    const result = await s.prompt();
    assert.deepEqual(result, {
      message: { customType: HIDDEN_MESSAGE_TYPE, content: "first recall\n\nsecond recall", display: false },
    });
    assert.equal(HIDDEN_MESSAGE_TYPE, "pimem-context");
  });

  test("snapshot and hidden texts together", async (t) => {
    const s = setup(t, {
      script: { answers: { "session.before_prompt": { snapshot: "SNAP", hidden: [{ text: "recall", source: "x" }] } } },
    });
    await s.startSession();
    assert.deepEqual(await s.prompt("p", "BASE"), {
      systemPrompt: "BASE\n\nSNAP",
      message: { customType: "pimem-context", content: "recall", display: false },
    });
  });

  test("no snapshot and no hidden texts leave the prompt alone", async (t) => {
    const s = setup(t);
    await s.startSession();
    assert.equal(await s.prompt(), undefined);
    assert.ok(s.methods().includes("session.before_prompt"));
  });

  test("a bridge that does not answer in time leaves the prompt alone", async (t) => {
    const s = setup(t, {
      script: {
        answers: { "session.before_prompt": { snapshot: "TOO LATE", hidden: [] } },
        delays: { "session.before_prompt": 30_000 },
      },
    });
    await s.startSession();
    assert.equal(await s.prompt(), undefined);
  });

  test("a crashed bridge leaves the prompt alone and is not respawned by prompts", async (t) => {
    const s = setup(t, { script: { crash: ["session.before_prompt"] } });
    await s.startSession();
    assert.equal(await s.prompt(), undefined, "the prompt during which the bridge crashed");
    await exited(s.children[0]!);
    assert.equal(s.children[0]!.exitCode, 3);
    assert.equal(await s.prompt(), undefined, "the prompt after the crash");
    assert.equal(s.children.length, 1, "prompts never wait for a respawn");
  });

  test("prompts while the bridge is down keep the session's snapshot", async (t) => {
    const s = setup(t, { script: { answers: { "session.before_prompt": { snapshot: "SNAP", hidden: [] } } } });
    await s.startSession();
    assert.deepEqual(await s.prompt("p", "BASE"), { systemPrompt: "BASE\n\nSNAP" });
    await killAndWait(s.children[0]!);
    assert.deepEqual(await s.prompt("q", "BASE"), { systemPrompt: "BASE\n\nSNAP" }, "the same bytes");
  });

  test("a prompt before session_start goes on without memory", async (t) => {
    const s = setup(t);
    assert.equal(await s.prompt(), undefined);
    assert.equal(s.children.length, 0);
  });
});

describe("capture", () => {
  test("pi 1.x: agent_settled sends session.settled with the leaf id", async (t) => {
    const s = setup(t, { version: "1.x" });
    await s.startSession();
    s.ctx.leaf = "entry-42";
    await s.pi.fire("agent_settled", {}, s.ctx);
    const settled = await s.waitForLog((entry) => entry.method === "session.settled");
    assert.deepEqual(settled.params, { leaf: "entry-42" });
  });

  test("pi 1.x: agent_end sends nothing", async (t) => {
    const s = setup(t, { version: "1.x" });
    await s.startSession();
    await s.pi.fire("agent_end", {}, s.ctx);
    await s.callTool("memory_status"); // a later request: whatever agent_end sent is logged by now
    assert.deepEqual(s.methods(), ["session.start", "memory.status"]);
  });

  test("pi 0.73: agent_end sends session.settled with the leaf id", async (t) => {
    const s = setup(t, { version: "0.73" });
    await s.startSession();
    s.ctx.leaf = "entry-7";
    await s.pi.fire("agent_end", {}, s.ctx);
    const settled = await s.waitForLog((entry) => entry.method === "session.settled");
    assert.deepEqual(settled.params, { leaf: "entry-7" });
  });

  test("pi 0.73: session_shutdown flushes a settled before session.shutdown", async (t) => {
    const s = setup(t, { version: "0.73" });
    await s.startSession();
    await s.pi.fire("before_agent_start", { prompt: "hi", systemPrompt: "base" }, s.ctx);
    s.ctx.leaf = "entry-9";
    await s.pi.fire("session_shutdown", {}, s.ctx);
    await s.waitForLog((entry) => entry.method === "session.shutdown");
    assert.deepEqual(s.methods(), ["session.start", "session.before_prompt", "session.settled", "session.shutdown"]);
    assert.deepEqual(s.requests()[2]!.params, { leaf: "entry-9" });
  });

  test("pi 0.73: a session without an agent run settles nothing at shutdown", async (t) => {
    const s = setup(t, { version: "0.73" });
    await s.startSession();
    await s.pi.fire("session_shutdown", {}, s.ctx);
    await s.waitForLog((entry) => entry.method === "session.shutdown");
    assert.deepEqual(s.methods(), ["session.start", "session.shutdown"]);
  });

  test("pi 0.73: a run settled by agent_end is not settled again at shutdown", async (t) => {
    const s = setup(t, { version: "0.73" });
    await s.startSession();
    await s.pi.fire("before_agent_start", { prompt: "hi", systemPrompt: "base" }, s.ctx);
    await s.pi.fire("agent_end", {}, s.ctx);
    await s.waitForLog((entry) => entry.method === "session.settled");
    await s.pi.fire("session_shutdown", {}, s.ctx);
    await s.waitForLog((entry) => entry.method === "session.shutdown");
    assert.deepEqual(s.methods(), ["session.start", "session.before_prompt", "session.settled", "session.shutdown"]);
  });

  test("no leaf id, no settled", async (t) => {
    const s = setup(t, { version: "0.73", context: { leafId: null } });
    await s.startSession();
    await s.pi.fire("before_agent_start", { prompt: "hi", systemPrompt: "base" }, s.ctx);
    await s.pi.fire("session_shutdown", {}, s.ctx);
    await s.waitForLog((entry) => entry.method === "session.shutdown");
    assert.deepEqual(s.methods(), ["session.start", "session.before_prompt", "session.shutdown"]);
  });

  test("session_compact sends session.compacted", async (t) => {
    const s = setup(t);
    await s.startSession();
    await s.pi.fire("session_compact", {}, s.ctx);
    const compacted = await s.waitForLog((entry) => entry.method === "session.compacted");
    assert.deepEqual(compacted.params, {});
  });

  test("session_shutdown sends session.shutdown, then ends stdin and leaves the bridge to exit alone", async (t) => {
    const s = setup(t, { version: "1.x", context: { hasUI: true } });
    await s.startSession();
    await s.pi.fire("session_shutdown", {}, s.ctx);
    // pi goes on at once: neither capture nor the last index run is waited for.
    await s.waitForLog((entry) => entry.method === "session.shutdown");
    assert.deepEqual(s.requests().at(-1)!.params, { wait_for_index: false, capture_wait_ms: 0 });
    await exited(s.children[0]!);
    assert.deepEqual(
      s.log().map((entry) => entry.method ?? entry.kind),
      ["started", "session.start", "session.shutdown", "eof"],
    );
    assert.equal(s.children[0]!.exitCode, 0);
  });

  test("a session switch waits for the previous bridge's last index run", async (t) => {
    const s = setup(t, { version: "1.x" });
    await s.startSession();
    await s.startSession(fakeContext({ cwd: s.dir, sessionId: "session-2" }));
    // The new bridge must not fight the old one for the database.
    assert.deepEqual(s.requests().find((entry) => entry.method === "session.shutdown")!.params, {
      capture_wait_ms: SWITCH_CAPTURE_WAIT_MS,
    });
    assert.equal(s.children[0]!.exitCode, 0);
  });

  test("pi's exit waits for no answer: a bridge that answers nothing does not hold it, and nothing is shown", async (t) => {
    const statuses: [string, string | undefined][] = [];
    const s = setup(t, { script: { delays: { "session.shutdown": 30_000 } }, context: { hasUI: true } });
    s.ctx.ui!.setStatus = (key, text) => statuses.push([key, text]);
    await s.startSession();
    await s.pi.fire("session_shutdown", {}, s.ctx); // returns though no answer ever comes
    await s.waitForLog((entry) => entry.method === "session.shutdown");
    assert.deepEqual(statuses, []);
    assert.deepEqual(s.ctx.notices, []);
  });

  test("what pimem did beside memory is shown once a session, as an info notice", async (t) => {
    const redacted = "redacted a secret from a captured exchange (1 aws-access-key) before distilling it";
    const git = "pimem added `.memsearch/memory/????-??-??.md merge=union` to .gitattributes";
    const notices = {
      "memory.status": [
        { text: redacted, key: "redacted" },
        { text: git },
        { text: "redacted 2 secrets from a captured exchange (2 openai-api-key) before distilling it", key: "redacted" },
        { text: git },
      ],
    };
    const s = setup(t, { script: { notices }, context: { hasUI: true } });
    await s.startSession();
    await s.callTool("memory_status");
    await s.callTool("memory_status");
    assert.deepEqual(s.ctx.notices, [
      { message: `pimem: ${redacted}`, level: "info" },
      { message: "pimem: added `.memsearch/memory/????-??-??.md merge=union` to .gitattributes", level: "info" },
    ]);
    // A new session is told again.
    const next = fakeContext({ cwd: s.dir, sessionId: "session-2", hasUI: true });
    await s.startSession(next);
    await s.pi.tool("memory_status").execute("call-2", {}, undefined, undefined, next);
    assert.equal(next.notices.length, 2);
  });

  test("in print mode pi's shutdown goes on at once; the bridge keeps the process until capture is done, and says so past 300 ms", async (t) => {
    const quick = setup(t);
    await quick.startSession();
    await quick.prompt();
    await quick.pi.fire("session_shutdown", {}, quick.ctx);
    const shutdown = await quick.waitForLog((entry) => entry.method === "session.shutdown");
    assert.deepEqual(shutdown.params, { wait_for_index: false, capture_wait_ms: PRINT_EXIT_CAPTURE_WAIT_MS });
    // Released (stdin ended, no longer holding pi) once pimem answered.
    await poll(() => quick.children[0]!.stdin?.writableEnded || undefined);
    assert.deepEqual(quick.stderr, []);

    const slow = setup(t, { script: { delays: { "session.shutdown": 30_000 } } });
    await slow.startSession();
    await slow.prompt();
    await slow.pi.fire("session_shutdown", {}, slow.ctx); // returns though capture goes on
    await slow.waitForLog((entry) => entry.method === "session.shutdown");
    assert.equal(slow.children[0]!.stdin?.writableEnded, false, "the bridge still holds the process");
    await poll(() => (slow.stderr.length > 0 ? slow.stderr : undefined));
    assert.deepEqual(slow.stderr, [`pimem: ${PRINT_SAVING}`]);

    // A session without an agent run has nothing to save: its bridge is let go at once.
    const none = setup(t, { script: { delays: { "session.shutdown": 30_000 } } });
    await none.startSession();
    await none.pi.fire("session_shutdown", {}, none.ctx);
    assert.equal(none.children[0]!.stdin?.writableEnded, true);
    assert.deepEqual(none.stderr, []);
    assert.equal(PRINT_SAVING, "saving the last exchange to memory (at most 4 s)");
  });

  test("memory calls after shutdown say the session has ended", async (t) => {
    const s = setup(t);
    await s.startSession();
    await s.pi.fire("session_shutdown", {}, s.ctx);
    await assert.rejects(s.callTool("memory_status"), /memory is shut down/);
    assert.equal(s.children.length, 1);
  });
});
