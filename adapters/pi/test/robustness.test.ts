// When pimem is missing, crashes or will not stop: prompts go on, tools say why, processes end.

import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { FAKE_PIMEM, exited, fakeContext, hasExited, killAndWait, poll, setup } from "./harness.ts";

const START_FIX = new RegExp(
  "Run `pimem setup pi` with the pimem you want pi to use \\(it records that command for this adapter\\), " +
    "or set PIMEM_BIN to the pimem executable of the Python environment where pimem is installed .*, " +
    `or put pimem on PATH; see "Use pimem in pi" in pimem's README\\.$`,
);

/** A message without a doubled full stop, a crash count or a promise to restart. */
function assertPlain(message: string): void {
  assert.doesNotMatch(message, /\.\./);
  assert.doesNotMatch(message, /stopped|restart/i);
}

describe("a command that cannot be started", () => {
  test("PIMEM_BIN naming a missing file: one notice at session start, no respawn, tools say why", async (t) => {
    const missing = join(import.meta.dirname, "no-such-pimem");
    const s = setup(t, { pimemBin: missing });
    await s.pi.fire("session_start", {}, s.ctx);
    await poll(() => (s.stderr.length > 0 ? true : undefined));

    let reason = "";
    await assert.rejects(s.callTool("memory_status"), (error: Error) => {
      reason = error.message.replace(/^memory_status failed: /, "");
      assert.notEqual(reason, error.message);
      return true;
    });
    assert.equal(
      reason.split(". Run `pimem setup pi`")[0],
      `pimem could not be started from PIMEM_BIN="${missing}" (no such file), so memory is off for this session`,
    );
    assert.match(reason, START_FIX);
    assertPlain(reason);

    // Every later call says the same; prompts go on without memory; nothing is started again.
    await assert.rejects(s.callTool("memory_search", { query: "q" }), { message: `memory_search failed: ${reason}` });
    assert.equal(await s.prompt(), undefined);
    await s.pi.fire("agent_settled", {}, s.ctx);
    await assert.rejects(s.callTool("memory_status"), { message: `memory_status failed: ${reason}` });
    assert.deepEqual(s.stderr, [`pimem: ${reason}`]);
    assert.equal(s.children.length, 1, "one spawn, no respawn");
    assert.equal(s.connection.spawnCount, 1);
    await s.pi.fire("session_shutdown", {}, s.ctx);
  });

  test("with pi's UI, the notice is shown there (as a warning) and not written to stderr", async (t) => {
    const missing = join(import.meta.dirname, "no-such-pimem");
    const s = setup(t, { pimemBin: missing, context: { hasUI: true } });
    await s.pi.fire("session_start", {}, s.ctx);
    await poll(() => (s.ctx.notices.length > 0 ? true : undefined));
    await assert.rejects(s.callTool("memory_status"));
    assert.equal(s.ctx.notices.length, 1);
    const [notice] = s.ctx.notices;
    assert.equal(notice!.level, "warning");
    assert.match(notice!.message, /^pimem: pimem could not be started from PIMEM_BIN=.*, so memory is off for this session\./);
    assert.deepEqual(s.stderr, []);
  });

  test("pimem looked up on PATH and not found", async (t) => {
    const s = setup(t, { command: "pimem-not-on-any-path" });
    await s.pi.fire("session_start", {}, s.ctx);
    await assert.rejects(s.callTool("memory_status"), (error: Error) => {
      assert.match(
        error.message,
        new RegExp(
          '^memory_status failed: pimem could not be started from "pimem-not-on-any-path" on PATH ' +
            "\\(not found; PIMEM_BIN is not set\\), so memory is off for this session\\. Run `pimem setup pi`",
        ),
      );
      return true;
    });
    assert.equal(s.stderr.length, 1);
    assert.equal(s.children.length, 1);
  });

  test("PIMEM_BIN naming a file that is not executable", async (t) => {
    const scratch = setup(t).dir;
    const file = join(scratch, "pimem");
    writeFileSync(file, "#!/bin/sh\nexit 0\n", { mode: 0o644 });
    const s = setup(t, { pimemBin: file });
    await s.pi.fire("session_start", {}, s.ctx);
    await assert.rejects(s.callTool("memory_write", { content: "- x" }), (error: Error) => {
      const why = `could not be started from PIMEM_BIN="${file}" (not an executable file), so `;
      assert.ok(error.message.includes(why), error.message);
      assert.match(error.message, START_FIX);
      assertPlain(error.message);
      return true;
    });
    await assert.rejects(s.callTool("memory_status"), /not an executable file/);
    assert.equal(await s.prompt(), undefined);
    assert.equal(s.stderr.length, 1);
    assert.equal(s.children.length, 1);
  });

  test("a command that exits before its ready line (a Python without pimem) is not retried", async (t) => {
    const traceback = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'pimem'\n";
    const s = setup(t, { pimemBin: FAKE_PIMEM, script: { failBeforeReady: { code: 1, stderr: traceback } } });
    await s.pi.fire("session_start", {}, s.ctx);
    // The first prompt waits for the bridge, and goes on without memory once it failed.
    assert.equal(await s.prompt(), undefined);
    assert.equal(s.stderr.length, 1);
    const expected =
      `pimem: pimem could not be started from PIMEM_BIN="${FAKE_PIMEM}" (it exited with code 1 before it ` +
      `was ready; last message: ModuleNotFoundError: No module named 'pimem'), so memory is off for this session. `;
    assert.ok(s.stderr[0]!.startsWith(expected), s.stderr[0]);
    assert.match(s.stderr[0]!, START_FIX);
    const reason = s.stderr[0]!.slice("pimem: ".length);
    for (let call = 0; call < 4; call++) {
      await assert.rejects(s.callTool("memory_status"), { message: `memory_status failed: ${reason}` });
    }
    assert.equal(s.stderr.length, 1);
    assert.equal(s.children.length, 1);
    assert.equal(s.log().filter((entry) => entry.kind === "started").length, 1);
  });

  test("a tool call made while the command is failing gets the same reason", async (t) => {
    const stderr = "pimem: error: argument command: invalid choice: 'serve'\n"; // a pimem without serve
    const s = setup(t, { pimemBin: FAKE_PIMEM, script: { failBeforeReady: { code: 2, stderr } } });
    await s.pi.fire("session_start", {}, s.ctx);
    await assert.rejects(s.callTool("memory_status"), (error: Error) => {
      const why = `(it exited with code 2 before it was ready; last message: ${stderr.trim()}), so memory is off`;
      assert.ok(error.message.includes(why), error.message);
      return true;
    });
    assert.equal(s.stderr.length, 1);
    assert.equal(s.children.length, 1);
  });

  test("a new session tries the command again", async (t) => {
    const missing = join(import.meta.dirname, "no-such-pimem");
    const s = setup(t, { pimemBin: missing });
    await s.pi.fire("session_start", {}, s.ctx);
    await assert.rejects(s.callTool("memory_status"), /no such file/);
    const next = fakeContext({ cwd: s.dir, sessionId: "session-2" });
    await s.pi.fire("session_start", {}, next);
    await assert.rejects(s.pi.tool("memory_status").execute("call-2", {}, undefined, undefined, next), /no such file/);
    assert.equal(s.stderr.length, 2);
    assert.equal(s.children.length, 2);
  });
});

describe("a bridge killed mid-session", () => {
  test("the next prompt goes on without memory and does not respawn", async (t) => {
    const s = setup(t);
    await s.startSession();
    await killAndWait(s.children[0]!);
    assert.equal(await s.prompt(), undefined);
    assert.equal(s.children.length, 1);
  });

  test("a memory call after the bridge died runs on a new bridge, which is told the same session", async (t) => {
    const s = setup(t, { script: { answers: { "memory.status": { text: "all good" } } } });
    await s.startSession();
    await killAndWait(s.children[0]!);
    const result = await s.callTool("memory_status");
    assert.deepEqual(result.content, [{ type: "text", text: "all good" }]);

    assert.equal(s.children.length, 2);
    const starts = s.requests().filter((entry) => entry.method === "session.start");
    assert.deepEqual(
      starts.map((entry) => [entry.pid, entry.params?.session_id]),
      [
        [s.children[0]!.pid, "session-1"],
        [s.children[1]!.pid, "session-1"],
      ],
    );
  });

  test("prompts use the new bridge again", async (t) => {
    const s = setup(t, { script: { answers: { "session.before_prompt": { snapshot: "SNAP", hidden: [] } } } });
    await s.startSession();
    await killAndWait(s.children[0]!);
    await s.callTool("memory_status");
    assert.deepEqual(await s.prompt("p", "BASE"), { systemPrompt: "BASE\n\nSNAP" });
  });

  for (const [tool, method, args] of [
    ["memory_search", "memory.search", { query: "q" }],
    ["memory_expand", "memory.expand", { chunk_hash: "0123456789abcdef" }],
    ["memory_status", "memory.status", {}],
    ["memory_transcript", "memory.transcript", { transcript_path: "/t.jsonl" }],
  ] as const) {
    test(`a ${tool} whose bridge dies under it is sent once more, to a new bridge`, async (t) => {
      const s = setup(t, { script: { crashOnce: [method] } });
      await s.startSession();
      const result = await s.callTool(tool, { ...args });
      assert.deepEqual(result.content, [{ type: "text", text: `${method} done` }]);
      assert.equal(s.children.length, 2);
      assert.equal(s.methods().filter((name) => name === method).length, 2);
    });
  }

  test("reads in flight when the bridge dies all reach the one new bridge", async (t) => {
    const s = setup(t, { script: { crashOnce: ["memory.search"] } });
    await s.startSession();
    // Both are sent before the bridge dies; whichever hears of it second finds the new bridge
    // started by the first, and goes to it.
    const [search, status] = await Promise.all([
      s.callTool("memory_search", { query: "q" }),
      s.callTool("memory_status"),
    ]);
    assert.deepEqual(search.content, [{ type: "text", text: "memory.search done" }]);
    assert.deepEqual(status.content, [{ type: "text", text: "memory.status done" }]);
    assert.equal(s.children.length, 2);
  });

  test("a read that fails on the new bridge too says why", async (t) => {
    const s = setup(t, { script: { crash: ["memory.search"] } });
    await s.startSession();
    await assert.rejects(s.callTool("memory_search", { query: "q" }), (error: Error) => {
      assert.match(error.message, /^memory_search failed: the pimem bridge exited with code 3/);
      assert.match(error.message, /Memory restarts on the next memory call\.$/);
      assert.doesNotMatch(error.message, /\.\./);
      return true;
    });
    assert.equal(s.children.length, 2, "sent once more, not again");
  });

  test("a settle whose bridge dies under it reaches the new bridge", async (t) => {
    const s = setup(t, { script: { crashOnce: ["session.settled"] } });
    await s.startSession();
    s.ctx.leaf = "entry-9";
    await s.pi.fire("agent_settled", {}, s.ctx);
    await poll(() => (s.requests().filter((entry) => entry.method === "session.settled").length === 2 ? true : undefined));
    const settles = s.requests().filter((entry) => entry.method === "session.settled");
    assert.deepEqual(settles.map((entry) => entry.params), [{ leaf: "entry-9" }, { leaf: "entry-9" }]);
    assert.notEqual(settles[0]!.pid, settles[1]!.pid);
  });

  test("a crash during a change fails that call with the reason, and it is not sent again", async (t) => {
    const s = setup(t, { script: { crash: ["memory.compact", "memory.write"] } });
    await s.startSession();
    await assert.rejects(s.callTool("memory_compact"), (error: Error) => {
      assert.match(error.message, /^memory_compact failed: the pimem bridge exited with code 3/);
      assert.match(error.message, /Memory restarts on the next memory call\.$/);
      return true;
    });
    await assert.rejects(s.callTool("memory_write", { content: "- x" }), /exited with code 3/);
    assert.equal(s.methods().filter((name) => name === "memory.write").length, 1);
  });

  test("a crash during a tool call is reported by that call only: the next call works", async (t) => {
    const s = setup(t, { script: { crash: ["memory.compact"] } });
    await s.startSession();
    await assert.rejects(s.callTool("memory_compact"), /exited with code 3/);
    const result = await s.callTool("memory_status");
    assert.deepEqual(result.content, [{ type: "text", text: "memory.status done" }]);
    assert.equal(s.children.length, 2);
  });

  test("bridges killed and healed unseen never turn memory off", async (t) => {
    const s = setup(t, { script: { answers: { "memory.status": { text: "all good" } } } });
    await s.startSession();
    for (let kill = 1; kill <= 5; kill++) {
      await killAndWait(s.children.at(-1)!);
      // The next call runs on a new bridge: the kill cost nothing the user saw.
      assert.deepEqual((await s.callTool("memory_status")).content, [{ type: "text", text: "all good" }]);
    }
    assert.equal(s.children.length, 6);
    assert.equal(s.connection.memoryOff, false);
    assert.deepEqual(s.stderr, []);
  });

  test("three failures that cost a memory call turn memory off, and the user is told at once", async (t) => {
    const s = setup(t, { script: { crash: ["memory.write"] } });
    await s.startSession();
    for (let failure = 1; failure <= 2; failure++) {
      await assert.rejects(s.callTool("memory_write", { content: "- x" }), /Memory restarts on the next memory call\.$/);
    }
    await s.callTool("memory_status"); // a new bridge, killed and healed by the next call
    await killAndWait(s.children.at(-1)!);
    assert.deepEqual(s.stderr, []);
    const off =
      /memory_write failed: memory is off for the rest of this session: the pimem bridge stopped 4 times, 3 of them failing a memory call \(last: the pimem bridge exited with code 3\)/;
    await assert.rejects(s.callTool("memory_write", { content: "- x" }), (error: Error) => {
      assert.match(error.message, off);
      assert.match(
        error.message,
        /\)\. The exchanges from now on are kept: the next pi session in this project captures them\. Run "pimem status" in the project to see the failures\. A new pi session \(\/new\) turns memory on again\.$/,
      );
      return true;
    });
    assert.equal(s.stderr.length, 1);
    assert.match(s.stderr[0]!, /^pimem: memory is off for the rest of this session: the pimem bridge stopped 4 times/);
    await assert.rejects(s.callTool("memory_status"), /memory_status failed: memory is off for the rest of this session/);
    assert.equal(await s.prompt(), undefined);
    assert.equal(s.children.length, 4, "no fifth bridge");
    assert.equal(s.stderr.length, 1);
  });
});

describe("the failure record", () => {
  function recorded(path: string): Record<string, unknown> {
    return JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  }

  test("each crash is written where pimem said, for pimem status", async (t) => {
    const dir = setup(t).dir;
    const path = join(dir, "records", "collection", "session.json");
    const s = setup(t, { script: { answers: { "session.start": { scope: {}, failure_record: path } } } });
    await s.startSession();
    await killAndWait(s.children[0]!);
    await poll(() => (existsSync(path) ? true : undefined));
    const record = recorded(path);
    assert.deepEqual(Object.keys(record), ["session_id", "transcript", "failures", "memory_off_at", "kept", "handover"]);
    assert.equal(record.session_id, "session-1");
    assert.deepEqual(
      (record.failures as { reason: string }[]).map((failure) => failure.reason),
      ["the pimem bridge was killed by SIGKILL"],
    );
    assert.equal(record.handover, false);
    await s.callTool("memory_status");
    await killAndWait(s.children[1]!);
    await poll(() => ((recorded(path).failures as unknown[]).length === 2 ? true : undefined));
  });

  test("a healed crash is recorded, not counted; with memory off every exchange is kept for the next session", async (t) => {
    const dir = setup(t).dir;
    const path = join(dir, "records", "session.json");
    const answers = { "session.start": { scope: {}, failure_record: path } };
    const s = setup(t, { script: { answers, crash: ["memory.forget"] } });
    await s.startSession();
    s.ctx.leaf = "entry-1";
    await s.pi.fire("agent_settled", {}, s.ctx);
    await s.waitForLog((entry) => entry.method === "session.settled");
    await killAndWait(s.children.at(-1)!);
    await s.callTool("memory_status");
    await poll(() => (existsSync(path) ? true : undefined));
    assert.deepEqual(
      (recorded(path).failures as { counted: boolean }[]).map((failure) => failure.counted),
      [false],
    );
    for (let failure = 1; failure <= 3; failure++) {
      await assert.rejects(s.callTool("memory_forget", { date: "2026-08-13", time: "10:00" }));
    }
    await poll(() => (s.stderr.length > 0 ? true : undefined));
    assert.match(s.stderr[0]!, /The exchanges from now on are kept: the next pi session in this project captures them\./);
    for (const leaf of ["entry-5", "entry-9"]) {
      s.ctx.leaf = leaf;
      await s.prompt("we moved the backups to eu-central-1");
      await s.pi.fire("agent_settled", {}, s.ctx);
    }
    await poll(() => ((recorded(path).kept as unknown[]).length === 2 ? true : undefined));
    const record = recorded(path);
    assert.deepEqual(record.kept, [
      { turn: "entry-5", after: "entry-1" },
      { turn: "entry-9", after: "entry-5" },
    ]);
    assert.equal(record.handover, true);
    assert.equal(typeof record.memory_off_at, "string");
    assert.deepEqual(
      (record.failures as { counted: boolean }[]).map((failure) => failure.counted),
      [false, true, true, true],
    );
    assert.equal(s.stderr.length, 1);
  });
});

describe("the failure record, a settle in flight", () => {
  test("a settle lost on two bridges costs a capture: counted, and kept once memory turns off", async (t) => {
    const dir = setup(t).dir;
    const path = join(dir, "records", "session.json");
    const answers = { "session.start": { scope: {}, failure_record: path } };
    const s = setup(t, { script: { answers, crash: ["session.settled"] } });
    await s.startSession();
    for (const [i, leaf] of ["entry-1", "entry-2", "entry-3"].entries()) {
      s.ctx.leaf = leaf;
      await s.pi.fire("agent_settled", {}, s.ctx);
      // Sent once more to a new bridge, which died too (the next settle starts a third).
      await poll(() => (s.children.length === 2 * (i + 1) && s.children.every(hasExited) ? true : undefined));
    }
    await poll(() => (existsSync(path) && (JSON.parse(readFileSync(path, "utf8")).kept as unknown[]).length > 0 ? true : undefined));
    const record = JSON.parse(readFileSync(path, "utf8")) as { failures: { counted: boolean }[] };
    assert.deepEqual(
      record.failures.map((failure) => failure.counted),
      [false, true, false, true, false, true],
    );
    assert.deepEqual(JSON.parse(readFileSync(path, "utf8")).kept, [{ turn: "entry-3", after: "entry-2" }]);
    assert.match(s.stderr[0]!, /The exchanges from now on are kept: the next pi session in this project captures them\./);
  });
});

describe("shutdown", () => {
  test("a bridge that ignores the end of stdin is killed after the grace period", async (t) => {
    const s = setup(t, { script: { ignoreEof: true } });
    await s.startSession();
    const report = await s.connection.close(5_000, 50);
    assert.deepEqual(report, { captured_in_time: true, indexed_in_time: true, seconds: 0 });
    const [child] = s.children;
    assert.equal(child!.signalCode, "SIGKILL");
    assert.deepEqual(
      s.log().map((entry) => entry.method ?? entry.kind),
      ["started", "session.start", "session.shutdown", "eof"],
    );
  });

  test("a bridge that does not answer session.shutdown within the cap is stopped anyway", async (t) => {
    const s = setup(t, { script: { delays: { "session.shutdown": 30_000 }, ignoreEof: true } });
    await s.startSession();
    assert.equal(await s.connection.close(50, 50), undefined);
    assert.equal(s.children[0]!.signalCode, "SIGKILL");
  });

  test("a bridge that never got ready is stopped without a shutdown request", async (t) => {
    const s = setup(t, { script: { silent: true, ignoreEof: true } });
    await s.pi.fire("session_start", {}, s.ctx);
    await s.waitForLog((entry) => entry.kind === "started");
    assert.equal(await s.connection.close(50, 50), undefined);
    assert.equal(s.children[0]!.signalCode, "SIGKILL");
    // session.start went at once, to wait in the pipe; no shutdown followed it.
    assert.ok(!s.methods().includes("session.shutdown"), s.methods().join(", "));
  });

  test("shutting down after a crash resolves", async (t) => {
    const s = setup(t);
    await s.startSession();
    await killAndWait(s.children[0]!);
    await s.pi.fire("session_shutdown", {}, s.ctx);
    await exited(s.children[0]!);
    assert.equal(s.children.length, 1);
  });
});
