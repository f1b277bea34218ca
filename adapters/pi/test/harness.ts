// A fake pi, a fake session context and a scripted fake `pimem serve` (fake-pimem.mjs) for the
// extension's tests. Every child process a test spawns is recorded and killed when it ends.

import { type ChildProcess, type SpawnOptions, spawn as nodeSpawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import type { Spawn } from "../src/bridge.ts";
import type { Connection } from "../src/connection.ts";
import { type Dependencies, createPimemExtension } from "../src/extension.ts";
import type { CompletionRequest } from "../src/host-model.ts";
import type { ContextLike, Handler, ModelInfo, PiLike, ToolDefinitionLike, ToolResult } from "../src/pi.ts";

export const FAKE_PIMEM = join(import.meta.dirname, "fake-pimem.mjs");

/** Records handlers and tools like pi does; `on` answers like pi 1.x or like pi 0.73. */
export class FakePi implements PiLike {
  readonly handlers = new Map<string, Handler[]>();
  readonly tools = new Map<string, ToolDefinitionLike>();
  private readonly returnsUnsubscribe: boolean;

  constructor(version: "1.x" | "0.73") {
    this.returnsUnsubscribe = version === "1.x";
  }

  on(event: string, handler: Handler): unknown {
    const list = this.handlers.get(event) ?? [];
    list.push(handler);
    this.handlers.set(event, list);
    if (!this.returnsUnsubscribe) return undefined;
    return () => list.splice(list.indexOf(handler), 1);
  }

  registerTool(tool: ToolDefinitionLike): void {
    this.tools.set(tool.name, tool);
  }

  /** Runs every handler of `event` like pi does and returns what they returned. */
  async fire(event: string, payload: unknown, ctx: ContextLike): Promise<unknown[]> {
    return Promise.all((this.handlers.get(event) ?? []).map((handler) => handler(payload, ctx)));
  }

  tool(name: string): ToolDefinitionLike {
    const tool = this.tools.get(name);
    if (!tool) throw new Error(`no tool ${name}`);
    return tool;
  }
}

export interface FakeContextOptions {
  cwd: string;
  sessionId?: string;
  sessionFile?: string;
  leafId?: string | null;
  models?: ModelInfo[];
  model?: ModelInfo;
  credentials?: { ok: boolean; apiKey?: string; headers?: Record<string, string>; error?: string };
  /** Like interactive and RPC pi (true), or print and json mode (false, the default). */
  hasUI?: boolean;
}

export interface Notice {
  message: string;
  level?: string;
}

/** A session context whose leaf id a test can move on (`ctx.leaf = ...`). */
export interface FakeContext extends ContextLike {
  leaf: string | null;
  /** What the extension showed with `ctx.ui.notify`. */
  notices: Notice[];
}

export function fakeContext(options: FakeContextOptions): FakeContext {
  const models = options.models ?? [];
  const notices: Notice[] = [];
  const ctx: FakeContext = {
    cwd: options.cwd,
    leaf: options.leafId === undefined ? "leaf-1" : options.leafId,
    notices,
    hasUI: options.hasUI ?? false,
    // pi has a ui in every mode; without one it does nothing.
    ui: { notify: (message, level) => (options.hasUI ? notices.push({ message, level }) : undefined) },
    sessionManager: {
      getSessionId: () => options.sessionId ?? "session-1",
      getSessionFile: () => options.sessionFile,
      getLeafId: () => ctx.leaf,
    },
    modelRegistry: {
      getAvailable: () => models,
      find: (provider, id) => models.find((model) => model.provider === provider && model.id === id),
      getApiKeyAndHeaders: async () => options.credentials ?? { ok: true, apiKey: "key-1", headers: { "x-test": "1" } },
    },
    model: options.model,
  };
  return ctx;
}

/** What the fake pimem wrote to its log (see fake-pimem.mjs). */
export interface LogEntry {
  pid: number;
  kind: "started" | "request" | "host-answer" | "eof";
  id?: number;
  method?: string;
  params?: Record<string, unknown>;
  cwd?: string;
  pythonioencoding?: string;
  message?: Record<string, unknown>;
}

export interface FakeScript {
  answers?: Record<string, Record<string, unknown>>;
  errors?: Record<string, { type: string; message: string }>;
  delays?: Record<string, number>;
  progress?: Record<string, string[]>;
  crash?: string[];
  crashOnce?: string[];
  complete?: Record<string, unknown>;
  notices?: Record<string, { text: string; key?: string }[]>;
  service?: { socket: string; python: string; version: string; protocol: number };
  ignoreEof?: boolean;
  silent?: boolean;
  failBeforeReady?: { code: number; stderr: string };
}

export interface SetupOptions {
  version?: "1.x" | "0.73";
  /** The test's directory (the session's cwd and PIMEM_HOME); else a new one. */
  dir?: string;
  script?: FakeScript;
  /** Defaults to the fake pimem. */
  command?: string;
  /** The command, as PIMEM_BIN names it (else PIMEM_BIN is not set). */
  pimemBin?: string;
  /** The record `pimem setup pi` wrote the command in (the command is then `command`). */
  recordedIn?: string;
  context?: Partial<FakeContextOptions>;
  complete?: (request: CompletionRequest) => Promise<string>;
  /** Called where the extension loads what its completions need. */
  prepareComplete?: () => void;
  /** What `PIMEM_PI_TIMINGS` would hear (else nothing is timed). */
  timing?: Dependencies["timing"];
}

export interface Setup {
  pi: FakePi;
  ctx: FakeContext;
  connection: Connection;
  /** Every process the extension spawned, oldest first. */
  children: ChildProcess[];
  /** Every completion the extension ran. */
  completions: CompletionRequest[];
  /** The lines the extension wrote to stderr. */
  stderr: string[];
  dir: string;
  log(): LogEntry[];
  requests(): LogEntry[];
  /** The methods the fake pimem received, in order. */
  methods(): string[];
  waitForLog(predicate: (entry: LogEntry) => boolean): Promise<LogEntry>;
  startSession(ctx?: ContextLike): Promise<void>;
  prompt(prompt?: string, systemPrompt?: string): Promise<unknown>;
  callTool(name: string, args?: Record<string, unknown>, onUpdate?: (partial: ToolResult) => void): Promise<ToolResult>;
}

/** Creates the extension on a fake pi, with the fake pimem as its command; cleans up after `t`. */
export function setup(t: TestContext, options: SetupOptions = {}): Setup {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "pimem-pi-test-"));
  const logFile = join(dir, "fake-pimem.log");
  const children: ChildProcess[] = [];
  const completions: CompletionRequest[] = [];
  const stderr: string[] = [];
  const spawn = ((command: string, args: string[], spawnOptions: SpawnOptions) => {
    const child = nodeSpawn(command, args, spawnOptions);
    children.push(child);
    return child;
  }) as Spawn;
  const { PIMEM_BIN: _outer, ...outer } = process.env;
  const deps: Dependencies = {
    command: options.pimemBin ?? options.command ?? FAKE_PIMEM,
    recordedIn: options.recordedIn,
    env: {
      ...outer,
      ...(options.pimemBin === undefined ? {} : { PIMEM_BIN: options.pimemBin }),
      // pimem's runtime directory, where a route to the memory service is kept: the test's own.
      PIMEM_HOME: dir,
      FAKE_PIMEM_LOG: logFile,
      FAKE_PIMEM_SCRIPT: JSON.stringify(options.script ?? {}),
    },
    spawn,
    timing: options.timing,
    stderr: (line) => stderr.push(line),
    prepareComplete: options.prepareComplete,
    complete: async (request) => {
      completions.push(request);
      return options.complete ? options.complete(request) : "completed";
    },
  };
  const pi = new FakePi(options.version ?? "1.x");
  const connection = createPimemExtension(pi, deps);
  const ctx = fakeContext({ cwd: dir, ...options.context });

  t.after(async () => {
    await Promise.all(children.map(killAndWait));
    rmSync(dir, { recursive: true, force: true });
  });

  const log = (): LogEntry[] =>
    existsSync(logFile)
      ? readFileSync(logFile, "utf8")
          .split("\n")
          .filter((line) => line)
          .map((line) => JSON.parse(line) as LogEntry)
      : [];
  const requests = () => log().filter((entry) => entry.kind === "request");

  return {
    pi,
    ctx,
    connection,
    children,
    completions,
    stderr,
    dir,
    log,
    requests,
    methods: () => requests().map((entry) => entry.method ?? ""),
    waitForLog: (predicate) => poll(() => log().find(predicate)),
    async startSession(startCtx = ctx) {
      await pi.fire("session_start", { type: "session_start" }, startCtx);
      if (!(await connection.whenStarted(10_000))) throw new Error("the fake pimem did not start");
    },
    async prompt(prompt = "hello", systemPrompt = "BASE") {
      const [result] = await pi.fire("before_agent_start", { prompt, systemPrompt }, ctx);
      return result;
    },
    callTool(name, args = {}, onUpdate) {
      return pi.tool(name).execute("call-1", args, undefined, onUpdate, ctx);
    },
  };
}

/** Resolves with the first value `probe` returns; fails after a generous deadline (a hang, not a timing check). */
export async function poll<T>(probe: () => T | undefined, deadlineMs = 10_000): Promise<T> {
  const giveUp = Date.now() + deadlineMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > giveUp) throw new Error("gave up waiting");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Waits for `child` to end (it was told to already). */
export async function exited(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || hasExited(child)) return;
  await holdingTheLoop(once(child, "exit"));
}

export async function killAndWait(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || hasExited(child)) return;
  const exit = once(child, "exit");
  child.kill("SIGKILL");
  await holdingTheLoop(exit);
}

/** `promise`, with the event loop kept open meanwhile: a bridge released while the test waits
 * (the extension unreferences it once pimem answers) no longer holds it. */
async function holdingTheLoop<T>(promise: Promise<T>): Promise<T> {
  const keep = setInterval(() => {}, 1_000);
  try {
    return await promise;
  } finally {
    clearInterval(keep);
  }
}
