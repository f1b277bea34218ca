// Which pimem the extension runs: PIMEM_BIN, else what `pimem setup pi` recorded, else PATH.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test, type TestContext } from "node:test";
import { RECORD_NAME, resolveCommand } from "../src/command.ts";
import { defaultDependencies } from "../src/extension.ts";
import { FAKE_PIMEM, poll, setup } from "./harness.ts";

function packageDir(t: TestContext, record?: string): string {
  const dir = mkdtempSync(join(tmpdir(), "pimem-pi-package-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  if (record !== undefined) writeFileSync(join(dir, RECORD_NAME), record);
  return dir;
}

describe("the pimem command", () => {
  test("the command `pimem setup pi` recorded in the package, when PIMEM_BIN is not set", (t) => {
    const dir = packageDir(t, JSON.stringify({ command: "/venv/bin/pimem", note: "written by pimem setup pi" }));
    assert.deepEqual(resolveCommand({}, dir), { command: "/venv/bin/pimem", recordedIn: join(dir, RECORD_NAME) });
    const deps = defaultDependencies({}, dir);
    assert.equal(deps.command, "/venv/bin/pimem");
    assert.equal(deps.recordedIn, join(dir, RECORD_NAME));
  });

  test("PIMEM_BIN wins over the record", (t) => {
    const dir = packageDir(t, JSON.stringify({ command: "/venv/bin/pimem" }));
    assert.deepEqual(resolveCommand({ PIMEM_BIN: "/other/pimem" }, dir), { command: "/other/pimem" });
  });

  test("no record, or one that says nothing usable: pimem on PATH", (t) => {
    assert.deepEqual(resolveCommand({}), { command: "pimem" });
    assert.deepEqual(resolveCommand({}, packageDir(t)), { command: "pimem" });
    for (const record of ["not json", "null", "[]", JSON.stringify({ command: "" }), JSON.stringify({ command: 7 })]) {
      assert.deepEqual(resolveCommand({}, packageDir(t, record)), { command: "pimem" }, record);
    }
  });

  test("a recorded command that is gone: the notice names the record and says to run pimem setup pi", async (t) => {
    const dir = packageDir(t);
    const missing = join(dir, "venv-removed", "pimem");
    const record = join(dir, RECORD_NAME);
    const s = setup(t, { command: missing, recordedIn: record });
    await s.pi.fire("session_start", {}, s.ctx);
    await poll(() => (s.stderr.length > 0 ? true : undefined));
    assert.equal(s.stderr.length, 1);
    assert.ok(
      s.stderr[0]!.startsWith(
        `pimem: pimem could not be started from "${missing}" (recorded by pimem setup pi in ${record}) ` +
          "(no such file), so memory is off for this session. Run `pimem setup pi` with the pimem you want pi to use",
      ),
      s.stderr[0],
    );
  });

  test("a recorded command that runs is used as the bridge", async (t) => {
    const s = setup(t, { command: FAKE_PIMEM, recordedIn: join(packageDir(t), RECORD_NAME) });
    await s.startSession();
    assert.equal(s.children.length, 1);
    assert.equal(s.children[0]!.spawnfile, FAKE_PIMEM);
    assert.deepEqual(s.stderr, []);
  });
});
