// A stand-in for the user's memory service (docs/host-protocol.md, "Attaching to the memory
// service"): a Unix socket in the test's runtime directory that says hello and answers an
// attach, then serves the session with the fake pimem, as the service serves a relayed one.

import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdirSync } from "node:fs";
import { type Socket, createServer } from "node:net";
import { join } from "node:path";
import type { TestContext } from "node:test";
import type { ServiceRoute } from "../src/service-route.ts";
import { FAKE_PIMEM, type FakeScript, killAndWait } from "./harness.ts";

export interface FakeServiceOptions {
  /** Refuse every attach with this reason. */
  refuse?: string;
  /** The version its hello says (else the route's). */
  version?: string;
  script?: FakeScript;
}

export interface FakeService {
  route: ServiceRoute;
  /** The attach requests received, in order. */
  attaches: Record<string, unknown>[];
  /** Stops listening and ends every attached session: the service went away. */
  close(): Promise<void>;
}

/** A fake memory service listening in `dir`'s runtime directory (`PIMEM_HOME=dir`). */
export async function fakeService(t: TestContext, dir: string, options: FakeServiceOptions = {}): Promise<FakeService> {
  const runtime = join(dir, "run");
  mkdirSync(runtime, { recursive: true, mode: 0o700 });
  chmodSync(runtime, 0o700);
  const route: ServiceRoute = { socket: join(runtime, "service-test.sock"), python: "/fake/prefix", version: "0.1.0", protocol: 2 };
  const attaches: Record<string, unknown>[] = [];
  const sessions: { socket: Socket; child?: ChildProcess }[] = [];
  const server = createServer((socket) => {
    const session: { socket: Socket; child?: ChildProcess } = { socket };
    sessions.push(session);
    socket.on("error", () => {});
    const hello = { service: "pimem", version: options.version ?? route.version, protocol: route.protocol, pid: process.pid, started: 0 };
    socket.write(`${JSON.stringify(hello)}\n`);
    let buffer = "";
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString("utf8");
      const newline = buffer.indexOf("\n");
      if (newline < 0) return;
      socket.off("data", onData);
      const request = JSON.parse(buffer.slice(0, newline)) as Record<string, unknown>;
      attaches.push(request);
      if (options.refuse) {
        socket.end(`${JSON.stringify({ refused: options.refuse })}\n`);
        return;
      }
      socket.write(`${JSON.stringify({ attached: true })}\n`);
      const child = spawn(process.execPath, [FAKE_PIMEM], {
        cwd: String(request.cwd),
        env: {
          ...process.env,
          FAKE_PIMEM_LOG: join(dir, "fake-pimem.log"),
          FAKE_PIMEM_SCRIPT: JSON.stringify(options.script ?? {}),
        },
        stdio: ["pipe", "pipe", "ignore"],
      });
      session.child = child;
      child.stdin?.on("error", () => {});
      child.stdin?.write(buffer.slice(newline + 1));
      socket.pipe(child.stdin!);
      child.stdout?.pipe(socket);
      child.on("exit", () => socket.destroy());
    };
    socket.on("data", onData);
  });
  await new Promise<void>((resolve) => server.listen(route.socket, resolve));
  const close = async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve())); // once no connection is left
    for (const session of sessions) {
      session.socket.destroy();
      if (session.child) await killAndWait(session.child);
    }
    await closed;
  };
  t.after(close);
  return { route, attaches, close };
}
