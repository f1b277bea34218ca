// The session's channel to pimem and the JSON-lines conversation on it (docs/host-protocol.md):
// the memory service's socket when a route names it, else one `pimem serve` process.

import { type ChildProcess, spawn as nodeSpawn } from "node:child_process";
import type { Socket } from "node:net";
import { attach } from "./service-attach.ts";
import { routeOf, type ServiceRoute } from "./service-route.ts";
import { sentences, takeLines } from "./text.ts";

export type Spawn = typeof nodeSpawn;

/** A request pimem could not answer; `type` is the protocol's error kind. */
export class BridgeError extends Error {
  readonly type: string;

  constructor(type: string, message: string) {
    super(message);
    this.name = "BridgeError";
    this.type = type;
  }
}

/** pimem asks the host (e.g. `complete`); the answer is sent back as the result. */
export type HostRequestHandler = (method: string, params: Record<string, unknown>) => Promise<unknown>;

export interface BridgeOptions {
  command: string;
  /** The record `command` came from, when `pimem setup pi` named it. */
  recordedIn?: string;
  cwd: string;
  env: NodeJS.ProcessEnv;
  onHostRequest: HostRequestHandler;
  /** Called once when the process ends (or could not be started at all). */
  onExit?: (exit: BridgeExit) => void;
  /** pimem tells the user something it did (`{"event": "notice"}`): `key` names its kind. */
  onNotice?: (text: string, key: string | undefined) => void;
  spawn?: Spawn;
  /** The memory service to attach to over its socket; the command is started only without
   * one, or when attaching fails. */
  route?: ServiceRoute;
  /** A bridge process said where the memory service listens (`{"event": "service"}`). */
  onRoute?: (route: ServiceRoute) => void;
}

/** How a bridge ended. */
export interface BridgeExit {
  /** A reason a person can read: for a start failure, also how to fix it. */
  reason: string;
  /** Whether it had printed its ready line: false means the command never ran as a bridge. */
  ready: boolean;
}

export interface CallOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  onProgress?: (text: string) => void;
}

interface Pending {
  resolve: (result: Record<string, unknown>) => void;
  reject: (error: Error) => void;
  onProgress?: (text: string) => void;
}

const STDERR_LINES = 20;
/** How long a bridge that exited before its ready line may take to close stderr. */
const STDERR_GRACE_MS = 1_000;

/** How to fix a command that cannot be started (README, "Use pimem in pi"). */
export const START_FIX =
  "Run `pimem setup pi` with the pimem you want pi to use (it records that command for this " +
  "adapter), or set PIMEM_BIN to the pimem executable of the Python environment where pimem is " +
  'installed (for a virtual environment, its bin/pimem), or put pimem on PATH; see "Use pimem in ' +
  "pi\" in pimem's README";

/** The command as it was tried: PIMEM_BIN's value, the recorded command, or `pimem` on PATH. */
export function describeCommand(command: string, env: NodeJS.ProcessEnv, recordedIn?: string): string {
  if (env.PIMEM_BIN === command) return `PIMEM_BIN="${command}"`;
  if (recordedIn !== undefined) return `"${command}" (recorded by pimem setup pi in ${recordedIn})`;
  return command.includes("/") ? `"${command}"` : `"${command}" on PATH`;
}

/** Why `command` never ran as a bridge (`why` is what went wrong), and how to fix it. */
export function startFailureMessage(
  command: string,
  env: NodeJS.ProcessEnv,
  why: string,
  recordedIn?: string,
): string {
  const unset = env.PIMEM_BIN || recordedIn !== undefined ? "" : "; PIMEM_BIN is not set";
  return sentences(
    `pimem could not be started from ${describeCommand(command, env, recordedIn)} (${why}${unset}), ` +
      "so memory is off for this session",
    START_FIX,
  );
}

/** What a spawn error means for the user. */
function spawnFailure(command: string, error: NodeJS.ErrnoException): string {
  if (error.code === "ENOENT") return command.includes("/") ? "no such file" : "not found";
  if (error.code === "EACCES") return "not an executable file";
  return error.message;
}

export class Bridge {
  readonly ready: Promise<void>;
  /** The bridge process, when there is one (no route, or attaching failed). */
  private child: ChildProcess | undefined;
  /** The memory service's socket, once attaching began. */
  private socket: Socket | undefined;
  /** Lines for pimem written while the socket still attaches, sent once the channel is open. */
  private waiting: string[] = [];
  private channelOpen = false;
  private held = true;
  private readonly pending = new Map<number, Pending>();
  private readonly stderr: string[] = [];
  private nextId = 1;
  private buffer = "";
  private exitReason: string | undefined;
  private isReady = false;
  private readonly exited: Promise<void>;
  private endExited: () => void = () => {};
  private markReady: () => void = () => {};
  private failReady: (error: Error) => void = () => {};
  private readonly options: BridgeOptions;

  constructor(options: BridgeOptions) {
    this.options = options;
    this.ready = new Promise<void>((resolve, reject) => {
      this.markReady = resolve;
      this.failReady = reject;
    });
    this.ready.catch(() => {}); // observed through calls; never an unhandled rejection
    this.exited = new Promise<void>((resolve) => {
      this.endExited = resolve;
    });
    if (options.route) void this.attachOrSpawn(options.route);
    else this.spawnChild();
  }

  get alive(): boolean {
    return this.exitReason === undefined;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Send a request and wait for its answer, at most `timeoutMs`. */
  call(method: string, params: Record<string, unknown>, options: CallOptions): Promise<Record<string, unknown>> {
    if (this.exitReason !== undefined) return Promise.reject(new BridgeError("bridge", this.exitReason));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        if (timer) clearTimeout(timer);
        options.signal?.removeEventListener("abort", aborted);
        this.pending.delete(id);
      };
      const aborted = () => {
        done();
        reject(new BridgeError("aborted", `${method} was cancelled`));
      };
      timer = setTimeout(() => {
        done();
        reject(new BridgeError("timeout", `pimem did not answer ${method} within ${options.timeoutMs} ms`));
      }, options.timeoutMs);
      options.signal?.addEventListener("abort", aborted, { once: true });
      this.pending.set(id, {
        resolve: (result) => {
          done();
          resolve(result);
        },
        reject: (error) => {
          done();
          reject(error);
        },
        onProgress: options.onProgress,
      });
      this.write({ id, method, params });
    });
  }

  /** Send a request whose answer nobody waits for (pi's exit): it is written, nothing more. */
  tell(method: string, params: Record<string, unknown>): void {
    this.write({ id: this.nextId++, method, params });
  }

  /** Whether the process and its pipes (or the socket) keep pi's event loop alive: a bridge
   * started ahead of a session (one that may never come, as in `pi --help`) must not keep pi
   * from exiting. */
  holdsPi(held: boolean): void {
    this.held = held;
    this.applyHold();
  }

  /**
   * End the input and leave pimem to finish alone: its last index run needs nothing from pi, so
   * pi exits without waiting for it (pimem bounds it by its shutdown cap). A socket still
   * attaching is dropped: the session never reached pimem, so nothing of it is left to finish.
   */
  release(): void {
    if (this.child) {
      this.child.stdin?.end();
      this.child.unref();
      for (const stream of [this.child.stdout, this.child.stderr]) (stream as Socket | null)?.unref();
    } else if (this.channelOpen) {
      this.socket?.end();
      this.socket?.unref();
    } else {
      this.abandon();
    }
  }

  /** End the input so pimem finishes its session, then cut it off if it is still there after
   * `graceMs` (the process is killed; the socket closed). */
  async stop(graceMs: number): Promise<void> {
    if (this.exitReason !== undefined) return;
    if (!this.channelOpen) {
      this.abandon();
      return;
    }
    const child = this.child;
    if (child) child.stdin?.end();
    else this.socket?.end();
    const timer = setTimeout(() => (child ? child.kill("SIGKILL") : this.socket?.destroy()), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  private async attachOrSpawn(route: ServiceRoute): Promise<void> {
    const attached = await attach(route, this.options.cwd, this.options.env, (socket) => {
      this.socket = socket;
      this.applyHold();
    });
    if (this.exitReason !== undefined) {
      attached?.socket.destroy(); // stopped while attaching
      return;
    }
    if (!attached) {
      this.socket = undefined;
      this.spawnChild(); // it finds (or starts) the service this session belongs to
      return;
    }
    const { socket, rest } = attached;
    socket.on("data", (chunk: string) => this.receive(chunk));
    socket.on("error", () => {}); // its close follows
    socket.on("close", () => this.finish("the connection to the memory service closed", true));
    this.isReady = true;
    this.markReady();
    this.openChannel();
    if (rest) this.receive(rest);
  }

  private spawnChild(): void {
    const options = this.options;
    const spawn = options.spawn ?? nodeSpawn;
    const child = spawn(options.command, ["serve"], {
      cwd: options.cwd,
      env: { ...options.env, PYTHONIOENCODING: "utf-8" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child = child;
    child.on("error", (error: NodeJS.ErrnoException) => {
      // Also a failed kill, which changes nothing here: its exit still follows.
      if (child.pid !== undefined) return;
      const why = spawnFailure(options.command, error);
      this.finish(startFailureMessage(options.command, options.env, why, options.recordedIn), false);
    });
    const report = (code: number | null, signal: NodeJS.Signals | null) => {
      const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
      const last = this.stderr.at(-1);
      if (this.isReady) {
        this.finish(`the pimem bridge ${how}${last ? ` (last message: ${last})` : ""}`, true);
      } else {
        const why = `it ${how} before it was ready${last ? `; last message: ${last}` : ""}`;
        this.finish(startFailureMessage(options.command, options.env, why, options.recordedIn), false);
      }
    };
    child.on("exit", (code, signal) => {
      if (this.isReady) {
        report(code, signal);
        return;
      }
      // It never got ready: what is still in its pipes tells why (its ready line after all, or
      // the last words of a Python that cannot import pimem). Wait for them to close, bounded,
      // since a grandchild may hold them open.
      const late = setTimeout(() => report(code, signal), STDERR_GRACE_MS);
      late.unref();
      child.once("close", () => {
        clearTimeout(late);
        report(code, signal);
      });
    });
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (chunk: string) => this.receive(chunk));
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      for (const line of chunk.split("\n")) {
        if (line.trim()) this.stderr.push(line.trim());
      }
      this.stderr.splice(0, Math.max(0, this.stderr.length - STDERR_LINES));
    });
    child.stdin?.on("error", () => {}); // a dead process shows up as "exit"
    this.applyHold();
    this.openChannel();
  }

  /** How the bridge ended, once: every request still waiting fails with `reason`. */
  private finish(reason: string, ready: boolean): void {
    if (this.exitReason !== undefined) return;
    this.exitReason = reason;
    const error = new BridgeError("bridge", reason);
    this.failReady(error);
    for (const pending of this.pending.values()) pending.reject(error);
    this.pending.clear();
    this.options.onExit?.({ reason, ready });
    this.endExited();
  }

  /** Given up before the socket attached (the session ended first): nothing reached pimem. */
  private abandon(): void {
    this.socket?.destroy();
    this.finish("the session ended before it reached the memory service", true);
  }

  private openChannel(): void {
    this.channelOpen = true;
    const lines = this.waiting;
    this.waiting = [];
    for (const line of lines) this.send(line);
  }

  private applyHold(): void {
    const handles = this.child
      ? [this.child, ...([this.child.stdin, this.child.stdout, this.child.stderr] as unknown as (Socket | null)[])]
      : [this.socket];
    for (const handle of handles) {
      if (this.held) handle?.ref();
      else handle?.unref();
    }
  }

  private write(message: object): void {
    if (this.exitReason !== undefined) return;
    const line = `${JSON.stringify(message)}\n`;
    if (this.channelOpen) this.send(line);
    else this.waiting.push(line);
  }

  private send(line: string): void {
    if (this.child) this.child.stdin?.write(line);
    else this.socket?.write(line);
  }

  private receive(chunk: string): void {
    const { lines, rest } = takeLines(this.buffer + chunk);
    this.buffer = rest;
    for (const line of lines) if (line.trim()) this.dispatch(line);
  }

  private dispatch(line: string): void {
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line) as Record<string, unknown>;
    } catch {
      this.stderr.push(`unreadable line from pimem: ${line.slice(0, 200)}`);
      return;
    }
    if (message.event === "ready") {
      this.isReady = true;
      this.markReady();
      return;
    }
    if (message.event === "service") {
      const route = routeOf(message);
      if (route) this.options.onRoute?.(route);
      return;
    }
    if (message.event === "notice") {
      if (typeof message.text === "string") {
        this.options.onNotice?.(message.text, typeof message.key === "string" ? message.key : undefined);
      }
      return;
    }
    if (typeof message.method === "string") {
      this.answerHost(message.id, message.method, (message.params ?? {}) as Record<string, unknown>);
      return;
    }
    const pending = typeof message.id === "number" ? this.pending.get(message.id) : undefined;
    if (!pending) return;
    if (typeof message.progress === "string") {
      pending.onProgress?.(message.progress);
    } else if (message.error) {
      const error = message.error as { type?: string; message?: string };
      pending.reject(new BridgeError(error.type ?? "internal", error.message ?? "pimem failed"));
    } else {
      pending.resolve((message.result ?? {}) as Record<string, unknown>);
    }
  }

  private answerHost(id: unknown, method: string, params: Record<string, unknown>): void {
    this.options.onHostRequest(method, params).then(
      (result) => this.write({ id, result }),
      (error: unknown) =>
        this.write({ id, error: { type: "host", message: error instanceof Error ? error.message : String(error) } }),
    );
  }
}
