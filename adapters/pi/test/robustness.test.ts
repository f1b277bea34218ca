// When pimem is missing, crashes or will not stop: prompts go on, tools say why, processes end.

import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { exited, killAndWait, setup } from "./harness.ts";

describe("missing pimem", () => {
  test("a tool call says pimem is not installed and how to install it", async (t) => {
    const s = setup(t, { command: join(import.meta.dirname, "no-such-pimem") });
    await s.pi.fire("session_start", {}, s.ctx);
    await assert.rejects(s.callTool("memory_status"), (error: Error) => {
      assert.match(error.message, /^memory_status failed: pimem is not installed here/);
      assert.match(error.message, /no-such-pimem/);
      assert.match(error.message, /pip install/);
      assert.match(error.message, /PIMEM_BIN/);
      return true;
    });
  });

  test("prompts still proceed, without memory", async (t) => {
    const s = setup(t, { command: join(import.meta.dirname, "no-such-pimem") });
    await s.pi.fire("session_start", {}, s.ctx);
    assert.equal(await s.prompt(), undefined);
    assert.equal(await s.prompt(), undefined);
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

  test("the next tool call says the bridge stopped and that memory restarts", async (t) => {
    const s = setup(t);
    await s.startSession();
    await killAndWait(s.children[0]!);
    await assert.rejects(s.callTool("memory_search", { query: "q" }), (error: Error) => {
      assert.match(error.message, /^memory_search failed: the pimem bridge was killed by SIGKILL/);
      assert.match(error.message, /Memory restarts on the next memory call\.$/);
      return true;
    });
  });

  test("the call after that succeeds on a respawned bridge, which is told the same session", async (t) => {
    const s = setup(t, { script: { answers: { "memory.status": { text: "all good" } } } });
    await s.startSession();
    await killAndWait(s.children[0]!);
    await assert.rejects(s.callTool("memory_status"));
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

  test("prompts use the respawned bridge again", async (t) => {
    const s = setup(t, { script: { answers: { "session.before_prompt": { snapshot: "SNAP", hidden: [] } } } });
    await s.startSession();
    await killAndWait(s.children[0]!);
    await assert.rejects(s.callTool("memory_status"));
    await s.callTool("memory_status");
    assert.deepEqual(await s.prompt("p", "BASE"), { systemPrompt: "BASE\n\nSNAP" });
  });

  test("a crash during a tool call fails that call with the reason", async (t) => {
    const s = setup(t, { script: { crash: ["memory.compact"] } });
    await s.startSession();
    await assert.rejects(s.callTool("memory_compact"), (error: Error) => {
      assert.match(error.message, /^memory_compact failed: the pimem bridge exited with code 3/);
      assert.match(error.message, /Memory restarts on the next memory call\.$/);
      return true;
    });
  });

  test("a crash during a tool call is reported by that call only: the next call works", async (t) => {
    const s = setup(t, { script: { crash: ["memory.compact"] } });
    await s.startSession();
    await assert.rejects(s.callTool("memory_compact"), /exited with code 3/);
    const result = await s.callTool("memory_status");
    assert.deepEqual(result.content, [{ type: "text", text: "memory.status done" }]);
    assert.equal(s.children.length, 2);
  });

  test("after two respawns memory is off for the rest of the session", async (t) => {
    const s = setup(t);
    await s.startSession();
    for (let respawn = 1; respawn <= 2; respawn++) {
      await killAndWait(s.children.at(-1)!);
      await assert.rejects(s.callTool("memory_status"), /Memory restarts on the next memory call/);
      await s.callTool("memory_status");
    }
    assert.equal(s.children.length, 3);

    await killAndWait(s.children.at(-1)!);
    const off = /memory_status failed: memory is off for the rest of this session: the pimem bridge stopped 3 times \(last: the pimem bridge was killed by SIGKILL\)/;
    await assert.rejects(s.callTool("memory_status"), off);
    await assert.rejects(s.callTool("memory_status"), off);
    assert.equal(await s.prompt(), undefined);
    assert.equal(s.children.length, 3, "no fourth bridge");
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
    assert.deepEqual(s.methods(), []);
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
