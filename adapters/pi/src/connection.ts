// The session's link to pimem: one bridge at a time, started lazily again after a crash. A
// memory call that finds the bridge dead runs on a new one; a read or a settle whose bridge died
// under it is sent once more, to the new one: the agent sees an error only when that fails too.
// Prompts never wait for a new bridge: they go on with the session's snapshot. Each crash is
// written to the session's failure record (a small JSON file whose path pimem gives at session
// start, docs/host-protocol.md), which `pimem status` reads. Only a crash that cost something
// counts toward turning memory off (a memory call that failed with it, a settle that could not
// be delivered): one healed unseen (a new bridge took over, a read sent again) is recorded and
// nothing more. Past the cap of those, memory is off for the session: the user is told at once,
// and every exchange from then on is kept in the record for the next session in the project to
// capture. A command that never got as far as its ready line (missing, not executable, a Python
// without pimem) is not retried: memory is off for the session, the user is told once, and
// every memory call says the same.

import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { Bridge, BridgeError, type CallOptions, type HostRequestHandler, type Spawn } from "./bridge.ts";
import { readRoute, writeRoute } from "./service-route.ts";
import { sentences } from "./text.ts";

/** Crashes that cost something (a memory call, a settle) followed by a new bridge, per
 * session: one more turns memory off. Crashes healed unseen do not count. */
export const MAX_RESPAWNS = 2;
export const START_TIMEOUT_MS = 60_000;

/** Requests worth sending again when the bridge died under them: they change nothing, or
 * pimem takes them twice as once (a settle of the same leaf is captured once). */
export const RETRIED = new Set(["memory.search", "memory.expand", "memory.status", "memory.transcript", "session.settled"]);

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
  /** Called once when the bridge failed too often: memory is off for the session, and the
   * exchanges from then on are kept for the next session. */
  onGiveUp?: (message: string) => void;
  /** pimem tells the user something it did (a line added to .gitattributes, a redaction). */
  onNotice?: (text: string, key: string | undefined) => void;
}

/** Who is asking: tools hear about failures, prompts never wait for a respawn. */
export type Caller = "tool" | "prompt" | "background";

/** One bridge death, as the failure record keeps it; `counted` once it cost something the
 * user saw (a memory call, a settle): only those count toward turning memory off. */
export interface Failure {
  at: string;
  reason: string;
  counted: boolean;
}

/** An exchange kept for capture by a later process: its last entry, and the one before it. */
export interface KeptTurn {
  turn: string;
  after: string | null;
}

/** The session's failure record (docs/host-protocol.md, "The failure record"). */
export interface FailureRecord {
  session_id: string;
  transcript: string | null;
  failures: Failure[];
  memory_off_at: string | null;
  kept: KeptTurn[];
  handover: boolean;
}

export class Connection {
  private readonly options: ConnectionOptions;
  private bridge: Bridge | undefined;
  /** A bridge started ahead of the session (see `prepare`), with where and when. */
  private early: { bridge: Bridge; cwd: string; spawned: number } | undefined;
  private started: Promise<void> | undefined;
  private session: SessionParams | undefined;
  private spawns = 0;
  /** Bridges that were running (past their ready line) and stopped. */
  private crashes = 0;
  /** Of those, the ones that cost a memory call or a settle: they count toward the cap. */
  private counted = 0;
  /** Each dead bridge's entry in the failure record. */
  private failures = new WeakMap<Bridge, Failure>();
  /** Whether the current bridge's session.start was answered. */
  private startedNow = false;
  /** Why the command could not be started, once it could not: no more bridges this session. */
  private startFailure: string | undefined;
  private lastCrash: string | undefined;
  private gaveUp = false;
  /** The leaf of the last settle sent: where the next exchange's window begins. */
  private lastSettled: string | null = null;
  private closing = false;
  /** Where pimem said to record this session's failures (from session.start). */
  private recordPath: string | undefined;
  private record: FailureRecord | undefined;

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

  /** Whether memory is off for the rest of the session (the bridge crashed too often). */
  get memoryOff(): boolean {
    return this.gaveUp;
  }

  /**
   * Start a bridge now, before any session: Python's start and pimem's imports then overlap
   * pi's own start-up, and the session's first prompt does not wait for them. Until a session
   * in `cwd` takes it, it does not keep pi alive; a pi that starts no session (`pi --help`)
   * leaves it to end with its stdin.
   */
  prepare(cwd: string): void {
    if (this.session || this.early) return;
    const bridge = this.newBridge(cwd);
    bridge.holdsPi(false);
    this.early = { bridge, cwd, spawned: performance.now() };
  }

  /** Start the bridge for a session; nothing is awaited, so pi's start-up never waits on Python. */
  open(session: SessionParams): void {
    this.session = session;
    this.closing = false;
    this.spawns = 0;
    this.crashes = 0;
    this.counted = 0;
    this.startFailure = undefined;
    this.lastCrash = undefined;
    this.gaveUp = false;
    this.lastSettled = null;
    this.recordPath = undefined;
    this.record = undefined;
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
    if (this.gaveUp) throw this.offFor(method, params);
    if (!this.bridge?.alive) {
      // Nothing was sent to the dead bridge: a memory call simply goes to a new one.
      if (caller === "prompt") throw new BridgeError("bridge", this.lastCrash ?? "the pimem bridge is not running");
      this.spawn();
    }
    const bridge = this.bridge;
    const settle = method === "session.settled";
    try {
      return await this.send(bridge, method, params, options);
    } catch (error) {
      // Only a bridge that died under this request is news here; anything else is the answer.
      // Another call may have started its successor already: this one goes to it all the same.
      if (!bridge || bridge.alive || this.startFailure !== undefined) throw error;
      if (this.gaveUp) throw this.offFor(method, params);
      if (caller === "prompt") throw new BridgeError("bridge", this.lastCrash ?? "the pimem bridge stopped");
      if (!RETRIED.has(method)) {
        // A change may or may not have been made: said, not repeated, and it counts.
        this.cost(bridge);
        if (this.gaveUp) throw this.offFor(method, params);
        throw new BridgeError("bridge", sentences(this.lastCrash, "Memory restarts on the next memory call"));
      }
      if (this.bridge === bridge || !this.bridge?.alive) this.spawn();
      const retried = this.bridge;
      try {
        return await this.send(retried, method, params, options);
      } catch (again) {
        if (this.gaveUp) throw this.offFor(method, params);
        if (retried?.alive === false && this.startFailure === undefined) {
          this.cost(retried); // sent twice and lost twice: the caller sees it
          if (this.gaveUp) throw this.offFor(method, params);
          throw new BridgeError("bridge", sentences(this.lastCrash, "Memory restarts on the next memory call"));
        }
        throw again;
      }
    } finally {
      if (settle && typeof params.leaf === "string") this.lastSettled = params.leaf;
    }
  }

  /**
   * Shut the session down in pimem within `capMs`, then stop the process (killed after
   * `graceMs`). `captureWaitMs` bounds the wait for capture; what is left then stays in pimem's
   * journal for the next session. With `detach`, the process is left to finish its last index
   * run alone once it answered; without `answered` too (pi's exit), nothing is waited for: the
   * request is sent and the process left to answer it alone.
   */
  async close(
    capMs: number,
    graceMs: number,
    {
      detach = false,
      captureWaitMs,
      answered = true,
    }: { detach?: boolean; captureWaitMs?: number; answered?: boolean } = {},
  ): Promise<Record<string, unknown> | undefined> {
    this.closing = true;
    const bridge = this.bridge;
    if (!bridge) return undefined;
    if (detach && !answered) {
      // pi's exit waits for nothing: the request is written and the process left to answer
      // it alone (what capture holds is journaled at once, docs/host-protocol.md).
      if (bridge.alive && this.startedNow) {
        bridge.tell("session.shutdown", { wait_for_index: false, capture_wait_ms: captureWaitMs ?? 0 });
      }
      bridge.release();
      this.bridge = undefined;
      this.started = undefined;
      return undefined;
    }
    let report: Record<string, unknown> | undefined;
    if (bridge.alive && this.started) {
      const params: Record<string, unknown> = detach ? { wait_for_index: false } : {};
      if (captureWaitMs !== undefined) params.capture_wait_ms = captureWaitMs;
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

  private send(
    bridge: Bridge | undefined,
    method: string,
    params: Record<string, unknown>,
    options: CallOptions,
  ): Promise<Record<string, unknown>> {
    const started = this.started;
    if (!bridge?.alive || !started) return Promise.reject(new BridgeError("bridge", this.gaveUpMessage()));
    return withDeadline(started, options.timeoutMs, undefined, () => {
      throw new BridgeError("timeout", `pimem did not start within ${options.timeoutMs} ms`);
    }).then(() => bridge.call(method, params, options));
  }

  private spawn(): void {
    const session = this.session;
    if (!session) return;
    this.spawns += 1;
    this.startedNow = false;
    const early = this.early;
    this.early = undefined;
    // The bridge started ahead serves the first session if it is still there and in its
    // directory; a dead one is not reported (a new bridge fails again, and says why).
    const adopted = early?.bridge.alive && early.cwd === session.cwd ? early : undefined;
    if (early && !adopted) void early.bridge.stop(0);
    const bridge = adopted?.bridge ?? this.newBridge(session.cwd);
    if (adopted) bridge.holdsPi(true);
    this.bridge = bridge;
    const spawned = adopted?.spawned ?? performance.now();
    const onReady = this.options.onReady;
    if (onReady) bridge.ready.then(() => onReady(performance.now() - spawned), () => {});
    // Sent at once, not after the ready line: it waits in the pipe until pimem reads it, so
    // pimem starts the session while pi is still busy starting up (docs/host-protocol.md).
    this.started = bridge.call("session.start", session, { timeoutMs: START_TIMEOUT_MS }).then((answer) => {
      if (this.bridge === bridge) this.startedNow = true;
      if (typeof answer.failure_record !== "string") return;
      this.recordPath = answer.failure_record;
      if (this.record) this.writeRecord(); // a crash before any bridge had said where
    });
    this.started.catch(() => {}); // seen by whoever waits on it
  }

  private newBridge(cwd: string): Bridge {
    const { command, env } = this.options;
    const bridge: Bridge = new Bridge({
      command,
      recordedIn: this.options.recordedIn,
      cwd,
      env,
      spawn: this.options.spawn,
      // The service the last bridge attached to, spoken to directly: no process to start.
      route: readRoute(env, command),
      onRoute: (route) => writeRoute(env, command, route),
      onHostRequest: this.options.onHostRequest,
      onNotice: this.options.onNotice,
      onExit: ({ reason, ready }) => {
        if (this.closing || this.bridge !== bridge) return;
        if (!ready) {
          this.startFailure = reason;
          this.options.onStartFailure?.(reason);
          return;
        }
        this.crashed(bridge, reason);
      },
    });
    return bridge;
  }

  /** A running bridge died: recorded. Whether it counts is known once it costs something. */
  private crashed(bridge: Bridge, reason: string): void {
    this.crashes += 1;
    this.lastCrash = reason;
    const failure: Failure = { at: new Date().toISOString(), reason, counted: false };
    this.failures.set(bridge, failure);
    this.failureRecord().failures.push(failure);
    this.writeRecord();
  }

  /** The death of `bridge` cost the user something: it counts, and past the cap memory turns
   * off at once. */
  private cost(bridge: Bridge): void {
    const failure = this.failures.get(bridge);
    if (!failure || failure.counted) return;
    failure.counted = true;
    this.counted += 1;
    const record = this.failureRecord();
    if (this.counted > (this.options.maxRespawns ?? MAX_RESPAWNS)) {
      this.gaveUp = true;
      record.memory_off_at = new Date().toISOString();
      record.handover = true;
      this.options.onGiveUp?.(this.gaveUpMessage());
    }
    this.writeRecord();
  }

  /** The error of a call made with memory off; a settle's exchange is kept for the next
   * session (every one from the moment memory turned off, each after the one before). */
  private offFor(method: string, params: Record<string, unknown>): BridgeError {
    if (method === "session.settled" && this.startFailure === undefined && typeof params.leaf === "string") {
      this.failureRecord().kept.push({ turn: params.leaf, after: this.lastSettled });
      this.lastSettled = params.leaf;
      this.writeRecord();
    }
    return new BridgeError("bridge", this.gaveUpMessage());
  }

  private failureRecord(): FailureRecord {
    this.record ??= {
      session_id: this.session?.session_id ?? "",
      transcript: this.session?.transcript ?? null,
      failures: [],
      memory_off_at: null,
      kept: [],
      handover: false,
    };
    return this.record;
  }

  /** Whole or not at all; a record that cannot be written costs status its lines, nothing more. */
  private writeRecord(): void {
    const path = this.recordPath;
    if (!path || !this.record) return;
    try {
      mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      const temporary = `${path}.${process.pid}.tmp`;
      writeFileSync(temporary, JSON.stringify(this.record), { mode: 0o600 });
      renameSync(temporary, path);
    } catch {
      // pimem's state directory is not writable: status will not name these failures
    }
  }

  private gaveUpMessage(): string {
    if (this.startFailure !== undefined) return this.startFailure;
    const times = this.crashes === 1 ? "once" : `${this.crashes} times`;
    const healed = this.crashes - this.counted;
    const counted = healed > 0 ? `, ${this.counted} of them failing a memory call` : "";
    return sentences(
      `memory is off for the rest of this session: the pimem bridge stopped ${times}${counted}` +
        `${this.lastCrash ? ` (last: ${this.lastCrash})` : ""}`,
      "The exchanges from now on are kept: the next pi session in this project captures them",
      'Run "pimem status" in the project to see the failures',
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
