// One `pimem serve` process and the JSON-lines conversation with it (docs/host-protocol.md).

import { type ChildProcess, spawn as nodeSpawn } from "node:child_process";
import type { Socket } from "node:net";
import { sentences } from "./text.ts";

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
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  private readonly stderr: string[] = [];
  private nextId = 1;
  private buffer = "";
  private exitReason: string | undefined;
  private isReady = false;
  private readonly exited: Promise<void>;
  private readonly options: BridgeOptions;

  constructor(options: BridgeOptions) {
    this.options = options;
    const spawn = options.spawn ?? nodeSpawn;
    this.child = spawn(options.command, ["serve"], {
      cwd: options.cwd,
      env: { ...options.env, PYTHONIOENCODING: "utf-8" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let markReady: () => void = () => {};
    let failReady: (error: Error) => void = () => {};
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    this.ready.catch(() => {}); // observed through calls; never an unhandled rejection
    this.exited = new Promise<void>((resolve) => {
      const finish = (reason: string, ready: boolean) => {
        if (this.exitReason !== undefined) return;
        this.exitReason = reason;
        const error = new BridgeError("bridge", reason);
        failReady(error);
        for (const pending of this.pending.values()) pending.reject(error);
        this.pending.clear();
        options.onExit?.({ reason, ready });
        resolve();
      };
      this.child.on("error", (error: NodeJS.ErrnoException) => {
        // Also a failed kill, which changes nothing here: its exit still follows.
        if (this.child.pid !== undefined) return;
        const why = spawnFailure(options.command, error);
        finish(startFailureMessage(options.command, options.env, why, options.recordedIn), false);
      });
      const report = (code: number | null, signal: NodeJS.Signals | null) => {
        const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
        const last = this.stderr.at(-1);
        if (this.isReady) {
          finish(`the pimem bridge ${how}${last ? ` (last message: ${last})` : ""}`, true);
        } else {
          const why = `it ${how} before it was ready${last ? `; last message: ${last}` : ""}`;
          finish(startFailureMessage(options.command, options.env, why, options.recordedIn), false);
        }
      };
      this.child.on("exit", (code, signal) => {
        if (this.isReady) {
          report(code, signal);
          return;
        }
        // It never got ready: what is still in its pipes tells why (its ready line after all, or
        // the last words of a Python that cannot import pimem). Wait for them to close, bounded,
        // since a grandchild may hold them open.
        const late = setTimeout(() => report(code, signal), STDERR_GRACE_MS);
        late.unref();
        this.child.once("close", () => {
          clearTimeout(late);
          report(code, signal);
        });
      });
    });
    this.child.stdout?.setEncoding("utf8");
    this.child.stdout?.on("data", (chunk: string) => this.receive(chunk, markReady));
    this.child.stderr?.setEncoding("utf8");
    this.child.stderr?.on("data", (chunk: string) => {
      for (const line of chunk.split("\n")) {
        if (line.trim()) this.stderr.push(line.trim());
      }
      this.stderr.splice(0, Math.max(0, this.stderr.length - STDERR_LINES));
    });
    this.child.stdin?.on("error", () => {}); // a dead process shows up as "exit"
  }

  get alive(): boolean {
    return this.exitReason === undefined;
  }

  get pid(): number | undefined {
    return this.child.pid;
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

  /** Whether the process and its pipes keep pi's event loop alive: a bridge started ahead of
   * a session (one that may never come, as in `pi --help`) must not keep pi from exiting. */
  holdsPi(held: boolean): void {
    const pipes = [this.child.stdin, this.child.stdout, this.child.stderr] as unknown as (Socket | null)[];
    for (const handle of [this.child, ...pipes]) {
      if (held) handle?.ref();
      else handle?.unref();
    }
  }

  /**
   * End stdin and leave pimem to finish alone: its last index run needs nothing from pi, so
   * pi exits without waiting for it (pimem bounds it by its shutdown cap).
   */
  release(): void {
    this.child.stdin?.end();
    this.child.unref();
    for (const stream of [this.child.stdout, this.child.stderr]) (stream as Socket | null)?.unref();
  }

  /** End stdin so pimem finishes its session, then kill it if it is still there after `graceMs`. */
  async stop(graceMs: number): Promise<void> {
    this.child.stdin?.end();
    if (this.exitReason !== undefined) return;
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  private write(message: object): void {
    if (this.exitReason === undefined) this.child.stdin?.write(`${JSON.stringify(message)}\n`);
  }

  // Split on "\n" only: JSON strings may hold U+2028, which line readers treat as a break.
  private receive(chunk: string, markReady: () => void): void {
    this.buffer += chunk;
    let newline = this.buffer.indexOf("\n");
    while (newline >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      if (line.trim()) this.dispatch(line, markReady);
      newline = this.buffer.indexOf("\n");
    }
  }

  private dispatch(line: string, markReady: () => void): void {
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line) as Record<string, unknown>;
    } catch {
      this.stderr.push(`unreadable line from pimem: ${line.slice(0, 200)}`);
      return;
    }
    if (message.event === "ready") {
      this.isReady = true;
      markReady();
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
