// The session's link to pimem: one bridge at a time, started lazily again after a crash, up to a
// cap per session. A crash is reported once, to the next tool call, so the agent learns why a
// memory call failed; prompts meanwhile go on without memory. A command that never got as far as
// its ready line (missing, not executable, a Python without pimem) is not retried: memory is off
// for the session, the user is told once, and every memory call says the same.

import { Bridge, BridgeError, type CallOptions, type HostRequestHandler, type Spawn } from "./bridge.ts";
import { sentences } from "./text.ts";

/** Crashes of a running bridge that are followed by a new one, per session. */
export const MAX_RESPAWNS = 2;
export const START_TIMEOUT_MS = 60_000;

export interface SessionParams {
  session_id: string;
  cwd: string;
  transcript: string | null;
  model?: Record<string, unknown>;
  models?: Record<string, unknown>[];
  [key: string]: unknown;
}

export interface ConnectionOptions {
  command: string;
  /** The record `command` came from, when `pimem setup pi` named it. */
  recordedIn?: string;
  env: NodeJS.ProcessEnv;
  onHostRequest: HostRequestHandler;
  spawn?: Spawn;
  maxRespawns?: number;
  /** Milliseconds from spawning a bridge to its ready line. */
  onReady?: (ms: number) => void;
  /** Called once when the command could not be started: memory is off for the session. */
  onStartFailure?: (message: string) => void;
  /** Called once when the bridge crashed too often: memory and capture are off for the session. */
  onGiveUp?: (message: string) => void;
}

/** Who is asking: tools hear about crashes, prompts never wait for a respawn. */
export type Caller = "tool" | "prompt" | "background";

export class Connection {
  private readonly options: ConnectionOptions;
  private bridge: Bridge | undefined;
  private started: Promise<void> | undefined;
  private session: SessionParams | undefined;
  private spawns = 0;
  /** Bridges that were running (past their ready line) and stopped. */
  private crashes = 0;
  /** Why the command could not be started, once it could not: no more bridges this session. */
  private startFailure: string | undefined;
  private unreportedCrash: string | undefined;
  private lastCrash: string | undefined;
  private gaveUp = false;
  private closing = false;

  constructor(options: ConnectionOptions) {
    this.options = options;
  }

  get sessionId(): string | undefined {
    return this.session?.session_id;
  }

  get spawnCount(): number {
    return this.spawns;
  }

  get pid(): number | undefined {
    return this.bridge?.pid;
  }

  /** Start the bridge for a session; nothing is awaited, so pi's start-up never waits on Python. */
  open(session: SessionParams): void {
    this.session = session;
    this.closing = false;
    this.spawns = 0;
    this.crashes = 0;
    this.startFailure = undefined;
    this.unreportedCrash = undefined;
    this.lastCrash = undefined;
    this.gaveUp = false;
    this.spawn();
  }

  /** Wait at most `waitMs` for the session to be started; false when it is not (yet). */
  async whenStarted(waitMs: number): Promise<boolean> {
    if (!this.started) return false;
    return withDeadline(this.started.then(() => true), waitMs, false).catch(() => false);
  }

  async request(
    method: string,
    params: Record<string, unknown>,
    caller: Caller,
    options: CallOptions,
  ): Promise<Record<string, unknown>> {
    if (!this.session) throw new BridgeError("bridge", "memory is not started: the pi session has not started yet");
    if (this.closing) throw new BridgeError("bridge", "memory is shut down: the pi session has ended");
    if (this.startFailure !== undefined) throw new BridgeError("bridge", this.startFailure);
    if (!this.bridge?.alive) {
      if (this.unreportedCrash !== undefined && caller !== "background") {
        if (caller === "tool") throw this.reportCrash();
        throw new BridgeError("bridge", this.unreportedCrash);
      }
      this.respawnOrGiveUp();
    }
    const bridge = this.bridge;
    const started = this.started;
    if (!bridge?.alive || !started) throw new BridgeError("bridge", this.gaveUpMessage());
    try {
      await withDeadline(started, options.timeoutMs, undefined, () => {
        throw new BridgeError("timeout", `pimem did not start within ${options.timeoutMs} ms`);
      });
      return await bridge.call(method, params, options);
    } catch (error) {
      // A crash that failed this very tool call is reported by it, not once more by the next one.
      if (caller === "tool" && this.bridge === bridge && !bridge.alive && this.unreportedCrash !== undefined) {
        throw this.reportCrash();
      }
      throw error;
    }
  }

  /**
   * Shut the session down in pimem within `capMs`, then stop the process (killed after
   * `graceMs`). With `detach`, pimem writes what capture holds and is then left to finish its
   * last index run alone: how pi exits without waiting on memsearch.
   */
  async close(
    capMs: number,
    graceMs: number,
    { detach = false }: { detach?: boolean } = {},
  ): Promise<Record<string, unknown> | undefined> {
    this.closing = true;
    const bridge = this.bridge;
    if (!bridge) return undefined;
    let report: Record<string, unknown> | undefined;
    if (bridge.alive && this.started) {
      const params = detach ? { wait_for_index: false } : {};
      report = await withDeadline(
        this.started.then(() => bridge.call("session.shutdown", params, { timeoutMs: capMs })),
        capMs,
        undefined,
      ).catch(() => undefined);
    }
    if (detach && report !== undefined) bridge.release();
    else await bridge.stop(graceMs);
    this.bridge = undefined;
    this.started = undefined;
    return report;
  }

  private spawn(): void {
    const session = this.session;
    if (!session) return;
    this.spawns += 1;
    const bridge = new Bridge({
      command: this.options.command,
      recordedIn: this.options.recordedIn,
      cwd: session.cwd,
      env: this.options.env,
      spawn: this.options.spawn,
      onHostRequest: this.options.onHostRequest,
      onExit: ({ reason, ready }) => {
        if (this.closing || this.bridge !== bridge) return;
        if (!ready) {
          this.startFailure = reason;
          this.options.onStartFailure?.(reason);
          return;
        }
        this.crashes += 1;
        this.unreportedCrash = reason;
        this.lastCrash = reason;
      },
    });
    this.bridge = bridge;
    const spawned = performance.now();
    const onReady = this.options.onReady;
    if (onReady) bridge.ready.then(() => onReady(performance.now() - spawned), () => {});
    this.started = bridge.ready.then(() =>
      bridge.call("session.start", session, { timeoutMs: START_TIMEOUT_MS }).then(() => undefined),
    );
    this.started.catch(() => {}); // seen by whoever waits on it
  }

  /** The crash, for a tool call; the bridge restarts for the next call unless the cap is reached. */
  private reportCrash(): BridgeError {
    const crash = this.unreportedCrash;
    this.unreportedCrash = undefined;
    // After the last respawn, "restarts on the next call" would be untrue.
    if (!this.respawnOrGiveUp()) return new BridgeError("bridge", this.gaveUpMessage());
    return new BridgeError("bridge", sentences(crash, "Memory restarts on the next memory call"));
  }

  /** A new bridge after a crash, unless the command cannot start or the cap is reached. */
  private respawnOrGiveUp(): boolean {
    if (this.startFailure !== undefined) return false;
    if (this.crashes > (this.options.maxRespawns ?? MAX_RESPAWNS)) {
      if (!this.gaveUp) {
        this.gaveUp = true;
        this.options.onGiveUp?.(this.gaveUpMessage());
      }
      return false;
    }
    this.spawn();
    return true;
  }

  private gaveUpMessage(): string {
    if (this.startFailure !== undefined) return this.startFailure;
    const times = this.crashes === 1 ? "once" : `${this.crashes} times`;
    return sentences(
      `memory is off for the rest of this session, capture included: the pimem bridge stopped ${times}` +
        `${this.lastCrash ? ` (last: ${this.lastCrash})` : ""}`,
      'Run "pimem status" in the project to see why',
      "A new pi session (/new) turns memory on again",
    );
  }
}

/** `promise`, or `fallback` (or what `onLate` returns or throws) once `ms` have passed. */
export function withDeadline<T, F>(
  promise: Promise<T>,
  ms: number,
  fallback: F,
  onLate?: () => F,
): Promise<T | F> {
  return new Promise<T | F>((resolve, reject) => {
    const timer = setTimeout(() => {
      try {
        resolve(onLate ? onLate() : fallback);
      } catch (error) {
        reject(error);
      }
    }, ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
