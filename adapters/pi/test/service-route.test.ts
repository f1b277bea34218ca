// The memory service spoken to directly: a session attaches over the service's socket when a
// route names it, and falls back to a bridge process whenever that cannot be had.

import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { ROUTE_FILE, readRoute, writeRoute } from "../src/service-route.ts";
import { fakeService } from "./fake-service.ts";
import { FAKE_PIMEM, fakeContext, poll, setup } from "./harness.ts";

describe("the memory service, attached directly", () => {
  test("with a route, a session attaches over the socket: no bridge process, and memory answers", async (t) => {
    const s = setup(t);
    const service = await fakeService(t, s.dir);
    writeRoute({ PIMEM_HOME: s.dir }, FAKE_PIMEM, service.route);
    await s.startSession();
    assert.equal(s.children.length, 0, "no bridge process was started");
    assert.equal(s.connection.pid, undefined);
    assert.equal((await s.callTool("memory_status")).content[0]!.text, "memory.status done");
    assert.deepEqual(s.methods(), ["session.start", "memory.status"]);
    const [attach] = service.attaches;
    assert.equal(attach!.op, "attach");
    assert.equal(attach!.cwd, s.dir);
    assert.equal(attach!.python, "/fake/prefix");
    assert.equal((attach!.env as Record<string, string>).PIMEM_HOME, s.dir);
  });

  for (const [why, options] of [
    ["refuses the attach", { refuse: "the client's settings differ from the memory service's (HOME)" }],
    ["is another version", { version: "0.0.9" }],
  ] as const) {
    test(`a service that ${why} leaves the session to a bridge process`, async (t) => {
      const s = setup(t);
      const service = await fakeService(t, s.dir, options);
      writeRoute({ PIMEM_HOME: s.dir }, FAKE_PIMEM, service.route);
      await s.startSession();
      assert.equal(s.children.length, 1);
      assert.equal((await s.callTool("memory_status")).content[0]!.text, "memory.status done");
      assert.equal(s.connection.memoryOff, false);
    });
  }

  test("a route is not taken from a file others may read, nor for another command, nor with the service off", async (t) => {
    const s = setup(t);
    const service = await fakeService(t, s.dir);
    const env = { PIMEM_HOME: s.dir };
    writeRoute(env, FAKE_PIMEM, service.route);
    const file = join(s.dir, "run", ROUTE_FILE);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.deepEqual(readRoute(env, FAKE_PIMEM), service.route);
    assert.equal(readRoute(env, "/another/pimem"), undefined);
    assert.equal(readRoute({ ...env, PIMEM_SERVICE: "off" }, FAKE_PIMEM), undefined);
    chmodSync(file, 0o644);
    assert.equal(readRoute(env, FAKE_PIMEM), undefined);
    await s.startSession();
    assert.equal(s.children.length, 1);
    assert.deepEqual(service.attaches, []);
  });

  test("a bridge that names its service records the route, and the next session attaches directly", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), "pimem-pi-test-"));
    const service = await fakeService(t, dir);
    const s = setup(t, { dir, script: { service: service.route } });
    await s.startSession();
    assert.equal(s.children.length, 1, "no route yet: a bridge");
    const recorded = await poll(() => readRoute({ PIMEM_HOME: dir }, FAKE_PIMEM));
    assert.deepEqual(recorded, service.route);
    assert.deepEqual(JSON.parse(readFileSync(join(dir, "run", ROUTE_FILE), "utf8")).command, FAKE_PIMEM);

    await s.startSession(fakeContext({ cwd: dir, sessionId: "session-2" }));
    assert.equal(s.children.length, 1, "the next session started no bridge");
    assert.equal(service.attaches.length, 1);
  });

  test("when the service goes away mid-session, the next memory call is answered and memory stays on", async (t) => {
    const s = setup(t);
    const service = await fakeService(t, s.dir);
    writeRoute({ PIMEM_HOME: s.dir }, FAKE_PIMEM, service.route);
    await s.startSession();
    await service.close();
    assert.equal((await s.callTool("memory_status")).content[0]!.text, "memory.status done");
    assert.equal(s.children.length, 1, "a bridge took over");
    assert.equal(s.connection.memoryOff, false);
  });
});
