// A session attached to the memory service over its socket: the service's hello, the attach
// request and its answer (docs/host-protocol.md, "Attaching to the memory service"). From then
// on the socket carries the host protocol's lines, as a bridge's pipes do.

import { connect, type Socket } from "node:net";
import type { ServiceRoute } from "./service-route.ts";
import { takeLines } from "./text.ts";

/** How long connecting and attaching may take before a bridge is started instead. */
export const ATTACH_TIMEOUT_MS = 1_000;

export interface Attached {
  socket: Socket;
  /** What the service wrote after its answer, in the same read: the session's first lines. */
  rest: string;
}

/**
 * Attach a session in `cwd` to the service `route` names; `undefined` when it cannot be had
 * (nothing listens, another version answers, the service refuses this installation or these
 * settings, or it takes longer than `timeoutMs`). `onSocket` receives the socket at once, so
 * the caller can decide whether it keeps pi running meanwhile.
 */
export function attach(
  route: ServiceRoute,
  cwd: string,
  env: NodeJS.ProcessEnv,
  onSocket: (socket: Socket) => void,
  timeoutMs = ATTACH_TIMEOUT_MS,
): Promise<Attached | undefined> {
  return new Promise((resolve) => {
    const socket = connect(route.socket);
    onSocket(socket);
    let buffer = "";
    let helloRead = false;
    let settled = false;
    const finish = (attached?: Attached) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("error", onFailure);
      socket.off("close", onFailure);
      if (!attached) socket.destroy();
      resolve(attached);
    };
    const onFailure = () => finish();
    const timer = setTimeout(onFailure, timeoutMs);
    timer.unref(); // the socket alone decides whether pi waits
    const onData = (chunk: string) => {
      const { lines, rest } = takeLines(buffer + chunk);
      buffer = rest;
      for (const [index, line] of lines.entries()) {
        let message: Record<string, unknown>;
        try {
          message = JSON.parse(line) as Record<string, unknown>;
        } catch {
          finish();
          return;
        }
        if (!helloRead) {
          if (message.service !== "pimem" || message.version !== route.version || message.protocol !== route.protocol) {
            finish(); // a session attached by another version ends unstarted with the socket
            return;
          }
          helloRead = true;
        } else if (message.working === undefined) {
          const after = [...lines.slice(index + 1), buffer].join("\n");
          finish(message.attached === true ? { socket, rest: after } : undefined);
          return;
        }
      }
    };
    socket.setEncoding("utf8");
    // Sent at once, not after the hello: the service reads it once its hello is out, and both
    // answers come back together, in one turn of pi's busy start-up.
    socket.write(`${JSON.stringify({ op: "attach", cwd, python: route.python, env: strings(env) })}\n`);
    socket.on("data", onData);
    socket.on("error", onFailure);
    socket.on("close", onFailure);
  });
}

function strings(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter((entry): entry is [string, string] => typeof entry[1] === "string"),
  );
}
