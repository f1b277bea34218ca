// Built by `npm run build` from src/ (ADR 0030): edit those files, not this one.

// src/pimem.ts
import { fileURLToPath } from "node:url";

// src/extension.ts
import { appendFileSync } from "node:fs";

// src/command.ts
import { readFileSync } from "node:fs";
import { join } from "node:path";
var RECORD_NAME = "pimem-command.json";
function resolveCommand(env, packageRoot) {
  if (env.PIMEM_BIN) return { command: env.PIMEM_BIN };
  if (packageRoot !== void 0) {
    const file = join(packageRoot, RECORD_NAME);
    try {
      const recorded = JSON.parse(readFileSync(file, "utf8"))?.command;
      if (typeof recorded === "string" && recorded !== "") return { command: recorded, recordedIn: file };
    } catch {
    }
  }
  return { command: "pimem" };
}

// src/commands.ts
var RECALL_SYNTAX = "/recall [--all] <query>";
var RECALL_USAGE = `/recall needs a query: ${RECALL_SYNTAX}, where --all searches every project under PI_MEMSEARCH_SCAN_ROOTS, not only this one. Nothing was sent to the model.`;
var RECALL_INSTRUCTION = "Use the recall skill to answer from memory: the user's message above is a /recall request. Answer it from the project's shared memory (memory_search, then memory_expand and memory_transcript as far as needed), say which day each part of the answer comes from, and say plainly when memory holds nothing about it.";
var RECALL_EVERYWHERE = 'It came with --all: search every project at once (memory_search with scope "all"), not this project first.';
function parseRecall(text2) {
  const match = /^\/recall(?:\s+([\s\S]*))?$/.exec(text2);
  if (!match) return void 0;
  const rest = (match[1] ?? "").trim();
  const flag = /^--all(?:\s+|$)/.exec(rest);
  return { query: flag ? rest.slice(flag[0].length).trim() : rest, all: flag !== null };
}
function isBareRecall(text2) {
  const match = /^\/recall(?:\s+([\s\S]*))?$/.exec(text2);
  if (!match) return false;
  const words = (match[1] ?? "").replace(/["']/g, " ").split(/\s+/);
  return words.every((word) => word === "" || word === "--all");
}
function recallInstruction(recall) {
  return recall.all ? `${RECALL_INSTRUCTION} ${RECALL_EVERYWHERE}` : RECALL_INSTRUCTION;
}
function registerCommands(pi, notify) {
  let pending;
  pi.on("input", (event, ctx) => {
    pending = void 0;
    if (isBareRecall(event.text)) {
      notify(ctx, RECALL_USAGE);
      return { action: "handled" };
    }
    const recall = parseRecall(event.text);
    if (!recall || ctx.isIdle?.() === false) return void 0;
    pending = recall;
    return { action: "transform", text: recall.query };
  });
  return (prompt) => {
    const recall = pending;
    pending = void 0;
    return recall && recall.query === prompt ? recallInstruction(recall) : void 0;
  };
}

// src/connection.ts
import { mkdirSync, renameSync as renameSync2, writeFileSync as writeFileSync2 } from "node:fs";
import { dirname as dirname2 } from "node:path";

// src/bridge.ts
import { spawn as nodeSpawn } from "node:child_process";

// src/service-attach.ts
import { connect } from "node:net";

// src/text.ts
function sentence(part) {
  const trimmed = part.trim().replace(/\.+$/, "");
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}
function sentences(...parts) {
  return parts.filter((part) => part !== void 0 && part.trim() !== "").map(sentence).join(" ");
}
function takeLines(buffer) {
  const lines = buffer.split("\n");
  const rest = lines.pop() ?? "";
  return { lines, rest };
}

// src/service-attach.ts
var ATTACH_TIMEOUT_MS = 1e3;
function attach(route, cwd, env, onSocket, timeoutMs = ATTACH_TIMEOUT_MS) {
  return new Promise((resolve) => {
    const socket = connect(route.socket);
    onSocket(socket);
    let buffer = "";
    let helloRead = false;
    let settled = false;
    const finish = (attached) => {
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
    timer.unref();
    const onData = (chunk) => {
      const { lines, rest } = takeLines(buffer + chunk);
      buffer = rest;
      for (const [index, line] of lines.entries()) {
        let message;
        try {
          message = JSON.parse(line);
        } catch {
          finish();
          return;
        }
        if (!helloRead) {
          if (message.service !== "pimem" || message.version !== route.version || message.protocol !== route.protocol) {
            finish();
            return;
          }
          helloRead = true;
        } else if (message.working === void 0) {
          const after = [...lines.slice(index + 1), buffer].join("\n");
          finish(message.attached === true ? { socket, rest: after } : void 0);
          return;
        }
      }
    };
    socket.setEncoding("utf8");
    socket.write(`${JSON.stringify({ op: "attach", cwd, python: route.python, env: strings(env) })}
`);
    socket.on("data", onData);
    socket.on("error", onFailure);
    socket.on("close", onFailure);
  });
}
function strings(env) {
  return Object.fromEntries(
    Object.entries(env).filter((entry) => typeof entry[1] === "string")
  );
}

// src/service-route.ts
import { lstatSync, readFileSync as readFileSync2, renameSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join as join2 } from "node:path";
var ROUTE_FILE = "pi-route.json";
var SERVICE_ON = /* @__PURE__ */ new Set(["on", "1", "true", "yes"]);
function routeOf(value) {
  const route = value;
  if (typeof route?.socket !== "string" || typeof route.python !== "string" || typeof route.version !== "string" || typeof route.protocol !== "number") {
    return void 0;
  }
  return { socket: route.socket, python: route.python, version: route.version, protocol: route.protocol };
}
function runtimeDir(env) {
  if (env.PIMEM_HOME) return join2(env.PIMEM_HOME.replace(/^~(?=\/|$)/, homedir()), "run");
  const xdg = env.XDG_RUNTIME_DIR;
  if (xdg && isDirectory(xdg)) return join2(xdg, "pimem");
  if (process.platform === "linux" && process.getuid) return join2(tmpdir(), `pimem-${process.getuid()}`);
  return void 0;
}
function readRoute(env, command) {
  if (!SERVICE_ON.has((env.PIMEM_SERVICE ?? "on").toLowerCase())) return void 0;
  const directory = runtimeDir(env);
  if (directory === void 0 || !isPrivate(directory, "directory")) return void 0;
  const file = join2(directory, ROUTE_FILE);
  if (!isPrivate(file, "file")) return void 0;
  try {
    const recorded = JSON.parse(readFileSync2(file, "utf8"));
    const route = routeOf(recorded);
    if (recorded?.command !== command || route === void 0) return void 0;
    if (dirname(route.socket) !== directory || !isPrivate(route.socket, "socket")) return void 0;
    return route;
  } catch {
    return void 0;
  }
}
function writeRoute(env, command, route) {
  const directory = runtimeDir(env);
  if (directory === void 0 || dirname(route.socket) !== directory || !isPrivate(directory, "directory")) return;
  const file = join2(directory, ROUTE_FILE);
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, JSON.stringify({ command, ...route }), { mode: 384 });
    renameSync(temporary, file);
  } catch {
  }
}
function isDirectory(path) {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}
function isPrivate(path, kind) {
  try {
    const stat = lstatSync(path);
    if (process.getuid && stat.uid !== process.getuid()) return false;
    if (kind === "socket") return stat.isSocket();
    const right = kind === "directory" ? stat.isDirectory() : stat.isFile();
    return right && (stat.mode & 63) === 0;
  } catch {
    return false;
  }
}

// src/bridge.ts
var BridgeError = class extends Error {
  type;
  constructor(type, message) {
    super(message);
    this.name = "BridgeError";
    this.type = type;
  }
};
var STDERR_LINES = 20;
var STDERR_GRACE_MS = 1e3;
var START_FIX = 'Run `pimem setup pi` with the pimem you want pi to use (it records that command for this adapter), or set PIMEM_BIN to the pimem executable of the Python environment where pimem is installed (for a virtual environment, its bin/pimem), or put pimem on PATH; see "Use pimem in pi" in pimem\'s README';
function describeCommand(command, env, recordedIn) {
  if (env.PIMEM_BIN === command) return `PIMEM_BIN="${command}"`;
  if (recordedIn !== void 0) return `"${command}" (recorded by pimem setup pi in ${recordedIn})`;
  return command.includes("/") ? `"${command}"` : `"${command}" on PATH`;
}
function startFailureMessage(command, env, why, recordedIn) {
  const unset = env.PIMEM_BIN || recordedIn !== void 0 ? "" : "; PIMEM_BIN is not set";
  return sentences(
    `pimem could not be started from ${describeCommand(command, env, recordedIn)} (${why}${unset}), so memory is off for this session`,
    START_FIX
  );
}
function spawnFailure(command, error) {
  if (error.code === "ENOENT") return command.includes("/") ? "no such file" : "not found";
  if (error.code === "EACCES") return "not an executable file";
  return error.message;
}
var Bridge = class {
  ready;
  /** The bridge process, when there is one (no route, or attaching failed). */
  child;
  /** The memory service's socket, once attaching began. */
  socket;
  /** Lines for pimem written while the socket still attaches, sent once the channel is open. */
  waiting = [];
  channelOpen = false;
  held = true;
  pending = /* @__PURE__ */ new Map();
  stderr = [];
  nextId = 1;
  buffer = "";
  exitReason;
  isReady = false;
  exited;
  endExited = () => {
  };
  markReady = () => {
  };
  failReady = () => {
  };
  options;
  constructor(options) {
    this.options = options;
    this.ready = new Promise((resolve, reject) => {
      this.markReady = resolve;
      this.failReady = reject;
    });
    this.ready.catch(() => {
    });
    this.exited = new Promise((resolve) => {
      this.endExited = resolve;
    });
    if (options.route) void this.attachOrSpawn(options.route);
    else this.spawnChild();
  }
  get alive() {
    return this.exitReason === void 0;
  }
  get pid() {
    return this.child?.pid;
  }
  /** Send a request and wait for its answer, at most `timeoutMs`. */
  call(method, params, options) {
    if (this.exitReason !== void 0) return Promise.reject(new BridgeError("bridge", this.exitReason));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      let timer;
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
        onProgress: options.onProgress
      });
      this.write({ id, method, params });
    });
  }
  /** Send a request whose answer nobody waits for (pi's exit): it is written, nothing more. */
  tell(method, params) {
    this.write({ id: this.nextId++, method, params });
  }
  /** Whether the process and its pipes (or the socket) keep pi's event loop alive: a bridge
   * started ahead of a session (one that may never come, as in `pi --help`) must not keep pi
   * from exiting. */
  holdsPi(held) {
    this.held = held;
    this.applyHold();
  }
  /**
   * End the input and leave pimem to finish alone: its last index run needs nothing from pi, so
   * pi exits without waiting for it (pimem bounds it by its shutdown cap). A socket still
   * attaching is dropped: the session never reached pimem, so nothing of it is left to finish.
   */
  release() {
    if (this.child) {
      this.child.stdin?.end();
      this.child.unref();
      for (const stream of [this.child.stdout, this.child.stderr]) stream?.unref();
    } else if (this.channelOpen) {
      this.socket?.end();
      this.socket?.unref();
    } else {
      this.abandon();
    }
  }
  /** End the input so pimem finishes its session, then cut it off if it is still there after
   * `graceMs` (the process is killed; the socket closed). */
  async stop(graceMs) {
    if (this.exitReason !== void 0) return;
    if (!this.channelOpen) {
      this.abandon();
      return;
    }
    const child = this.child;
    if (child) child.stdin?.end();
    else this.socket?.end();
    const timer = setTimeout(() => child ? child.kill("SIGKILL") : this.socket?.destroy(), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
  async attachOrSpawn(route) {
    const attached = await attach(route, this.options.cwd, this.options.env, (socket2) => {
      this.socket = socket2;
      this.applyHold();
    });
    if (this.exitReason !== void 0) {
      attached?.socket.destroy();
      return;
    }
    if (!attached) {
      this.socket = void 0;
      this.spawnChild();
      return;
    }
    const { socket, rest } = attached;
    socket.on("data", (chunk) => this.receive(chunk));
    socket.on("error", () => {
    });
    socket.on("close", () => this.finish("the connection to the memory service closed", true));
    this.isReady = true;
    this.markReady();
    this.openChannel();
    if (rest) this.receive(rest);
  }
  spawnChild() {
    const options = this.options;
    const spawn = options.spawn ?? nodeSpawn;
    const child = spawn(options.command, ["serve"], {
      cwd: options.cwd,
      env: { ...options.env, PYTHONIOENCODING: "utf-8" },
      stdio: ["pipe", "pipe", "pipe"]
    });
    this.child = child;
    child.on("error", (error) => {
      if (child.pid !== void 0) return;
      const why = spawnFailure(options.command, error);
      this.finish(startFailureMessage(options.command, options.env, why, options.recordedIn), false);
    });
    const report = (code, signal) => {
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
      const late = setTimeout(() => report(code, signal), STDERR_GRACE_MS);
      late.unref();
      child.once("close", () => {
        clearTimeout(late);
        report(code, signal);
      });
    });
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (chunk) => this.receive(chunk));
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk) => {
      for (const line of chunk.split("\n")) {
        if (line.trim()) this.stderr.push(line.trim());
      }
      this.stderr.splice(0, Math.max(0, this.stderr.length - STDERR_LINES));
    });
    child.stdin?.on("error", () => {
    });
    this.applyHold();
    this.openChannel();
  }
  /** How the bridge ended, once: every request still waiting fails with `reason`. */
  finish(reason, ready) {
    if (this.exitReason !== void 0) return;
    this.exitReason = reason;
    const error = new BridgeError("bridge", reason);
    this.failReady(error);
    for (const pending of this.pending.values()) pending.reject(error);
    this.pending.clear();
    this.options.onExit?.({ reason, ready });
    this.endExited();
  }
  /** Given up before the socket attached (the session ended first): nothing reached pimem. */
  abandon() {
    this.socket?.destroy();
    this.finish("the session ended before it reached the memory service", true);
  }
  openChannel() {
    this.channelOpen = true;
    const lines = this.waiting;
    this.waiting = [];
    for (const line of lines) this.send(line);
  }
  applyHold() {
    const handles = this.child ? [this.child, ...[this.child.stdin, this.child.stdout, this.child.stderr]] : [this.socket];
    for (const handle of handles) {
      if (this.held) handle?.ref();
      else handle?.unref();
    }
  }
  write(message) {
    if (this.exitReason !== void 0) return;
    const line = `${JSON.stringify(message)}
`;
    if (this.channelOpen) this.send(line);
    else this.waiting.push(line);
  }
  send(line) {
    if (this.child) this.child.stdin?.write(line);
    else this.socket?.write(line);
  }
  receive(chunk) {
    const { lines, rest } = takeLines(this.buffer + chunk);
    this.buffer = rest;
    for (const line of lines) if (line.trim()) this.dispatch(line);
  }
  dispatch(line) {
    let message;
    try {
      message = JSON.parse(line);
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
        this.options.onNotice?.(message.text, typeof message.key === "string" ? message.key : void 0);
      }
      return;
    }
    if (typeof message.method === "string") {
      this.answerHost(message.id, message.method, message.params ?? {});
      return;
    }
    const pending = typeof message.id === "number" ? this.pending.get(message.id) : void 0;
    if (!pending) return;
    if (typeof message.progress === "string") {
      pending.onProgress?.(message.progress);
    } else if (message.error) {
      const error = message.error;
      pending.reject(new BridgeError(error.type ?? "internal", error.message ?? "pimem failed"));
    } else {
      pending.resolve(message.result ?? {});
    }
  }
  answerHost(id, method, params) {
    this.options.onHostRequest(method, params).then(
      (result) => this.write({ id, result }),
      (error) => this.write({ id, error: { type: "host", message: error instanceof Error ? error.message : String(error) } })
    );
  }
};

// src/connection.ts
var MAX_RESPAWNS = 2;
var START_TIMEOUT_MS = 6e4;
var RETRIED = /* @__PURE__ */ new Set(["memory.search", "memory.expand", "memory.status", "memory.transcript", "session.settled"]);
var Connection = class {
  options;
  bridge;
  /** A bridge started ahead of the session (see `prepare`), with where and when. */
  early;
  started;
  session;
  spawns = 0;
  /** Bridges that were running (past their ready line) and stopped. */
  crashes = 0;
  /** Of those, the ones that cost a memory call or a settle: they count toward the cap. */
  counted = 0;
  /** Each dead bridge's entry in the failure record. */
  failures = /* @__PURE__ */ new WeakMap();
  /** Whether the current bridge's session.start was answered. */
  startedNow = false;
  /** Why the command could not be started, once it could not: no more bridges this session. */
  startFailure;
  lastCrash;
  gaveUp = false;
  /** The leaf of the last settle sent: where the next exchange's window begins. */
  lastSettled = null;
  closing = false;
  /** Where pimem said to record this session's failures (from session.start). */
  recordPath;
  record;
  constructor(options) {
    this.options = options;
  }
  get sessionId() {
    return this.session?.session_id;
  }
  get spawnCount() {
    return this.spawns;
  }
  get pid() {
    return this.bridge?.pid;
  }
  /** Whether memory is off for the rest of the session (the bridge crashed too often). */
  get memoryOff() {
    return this.gaveUp;
  }
  /**
   * Start a bridge now, before any session: Python's start and pimem's imports then overlap
   * pi's own start-up, and the session's first prompt does not wait for them. Until a session
   * in `cwd` takes it, it does not keep pi alive; a pi that starts no session (`pi --help`)
   * leaves it to end with its stdin.
   */
  prepare(cwd) {
    if (this.session || this.early) return;
    const bridge = this.newBridge(cwd);
    bridge.holdsPi(false);
    this.early = { bridge, cwd, spawned: performance.now() };
  }
  /** Start the bridge for a session; nothing is awaited, so pi's start-up never waits on Python. */
  open(session) {
    this.session = session;
    this.closing = false;
    this.spawns = 0;
    this.crashes = 0;
    this.counted = 0;
    this.startFailure = void 0;
    this.lastCrash = void 0;
    this.gaveUp = false;
    this.lastSettled = null;
    this.recordPath = void 0;
    this.record = void 0;
    this.spawn();
  }
  /** Wait at most `waitMs` for the session to be started; false when it is not (yet). */
  async whenStarted(waitMs) {
    if (!this.started) return false;
    return withDeadline(this.started.then(() => true), waitMs, false).catch(() => false);
  }
  async request(method, params, caller, options) {
    if (!this.session) throw new BridgeError("bridge", "memory is not started: the pi session has not started yet");
    if (this.closing) throw new BridgeError("bridge", "memory is shut down: the pi session has ended");
    if (this.startFailure !== void 0) throw new BridgeError("bridge", this.startFailure);
    if (this.gaveUp) throw this.offFor(method, params);
    if (!this.bridge?.alive) {
      if (caller === "prompt") throw new BridgeError("bridge", this.lastCrash ?? "the pimem bridge is not running");
      this.spawn();
    }
    const bridge = this.bridge;
    const settle = method === "session.settled";
    try {
      return await this.send(bridge, method, params, options);
    } catch (error) {
      if (!bridge || bridge.alive || this.startFailure !== void 0) throw error;
      if (this.gaveUp) throw this.offFor(method, params);
      if (caller === "prompt") throw new BridgeError("bridge", this.lastCrash ?? "the pimem bridge stopped");
      if (!RETRIED.has(method)) {
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
        if (retried?.alive === false && this.startFailure === void 0) {
          this.cost(retried);
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
  async close(capMs, graceMs, {
    detach = false,
    captureWaitMs,
    answered = true
  } = {}) {
    this.closing = true;
    const bridge = this.bridge;
    if (!bridge) return void 0;
    if (detach && !answered) {
      if (bridge.alive && this.startedNow) {
        bridge.tell("session.shutdown", { wait_for_index: false, capture_wait_ms: captureWaitMs ?? 0 });
      }
      bridge.release();
      this.bridge = void 0;
      this.started = void 0;
      return void 0;
    }
    let report;
    if (bridge.alive && this.started) {
      const params = detach ? { wait_for_index: false } : {};
      if (captureWaitMs !== void 0) params.capture_wait_ms = captureWaitMs;
      report = await withDeadline(
        this.started.then(() => bridge.call("session.shutdown", params, { timeoutMs: capMs })),
        capMs,
        void 0
      ).catch(() => void 0);
    }
    if (detach && report !== void 0) bridge.release();
    else await bridge.stop(graceMs);
    this.bridge = void 0;
    this.started = void 0;
    return report;
  }
  send(bridge, method, params, options) {
    const started = this.started;
    if (!bridge?.alive || !started) return Promise.reject(new BridgeError("bridge", this.gaveUpMessage()));
    return withDeadline(started, options.timeoutMs, void 0, () => {
      throw new BridgeError("timeout", `pimem did not start within ${options.timeoutMs} ms`);
    }).then(() => bridge.call(method, params, options));
  }
  spawn() {
    const session = this.session;
    if (!session) return;
    this.spawns += 1;
    this.startedNow = false;
    const early = this.early;
    this.early = void 0;
    const adopted = early?.bridge.alive && early.cwd === session.cwd ? early : void 0;
    if (early && !adopted) void early.bridge.stop(0);
    const bridge = adopted?.bridge ?? this.newBridge(session.cwd);
    if (adopted) bridge.holdsPi(true);
    this.bridge = bridge;
    const spawned = adopted?.spawned ?? performance.now();
    const onReady = this.options.onReady;
    if (onReady) bridge.ready.then(() => onReady(performance.now() - spawned), () => {
    });
    this.started = bridge.call("session.start", session, { timeoutMs: START_TIMEOUT_MS }).then((answer) => {
      if (this.bridge === bridge) this.startedNow = true;
      if (typeof answer.failure_record !== "string") return;
      this.recordPath = answer.failure_record;
      if (this.record) this.writeRecord();
    });
    this.started.catch(() => {
    });
  }
  newBridge(cwd) {
    const { command, env } = this.options;
    const bridge = new Bridge({
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
      }
    });
    return bridge;
  }
  /** A running bridge died: recorded. Whether it counts is known once it costs something. */
  crashed(bridge, reason) {
    this.crashes += 1;
    this.lastCrash = reason;
    const failure = { at: (/* @__PURE__ */ new Date()).toISOString(), reason, counted: false };
    this.failures.set(bridge, failure);
    this.failureRecord().failures.push(failure);
    this.writeRecord();
  }
  /** The death of `bridge` cost the user something: it counts, and past the cap memory turns
   * off at once. */
  cost(bridge) {
    const failure = this.failures.get(bridge);
    if (!failure || failure.counted) return;
    failure.counted = true;
    this.counted += 1;
    const record = this.failureRecord();
    if (this.counted > (this.options.maxRespawns ?? MAX_RESPAWNS)) {
      this.gaveUp = true;
      record.memory_off_at = (/* @__PURE__ */ new Date()).toISOString();
      record.handover = true;
      this.options.onGiveUp?.(this.gaveUpMessage());
    }
    this.writeRecord();
  }
  /** The error of a call made with memory off; a settle's exchange is kept for the next
   * session (every one from the moment memory turned off, each after the one before). */
  offFor(method, params) {
    if (method === "session.settled" && this.startFailure === void 0 && typeof params.leaf === "string") {
      this.failureRecord().kept.push({ turn: params.leaf, after: this.lastSettled });
      this.lastSettled = params.leaf;
      this.writeRecord();
    }
    return new BridgeError("bridge", this.gaveUpMessage());
  }
  failureRecord() {
    this.record ??= {
      session_id: this.session?.session_id ?? "",
      transcript: this.session?.transcript ?? null,
      failures: [],
      memory_off_at: null,
      kept: [],
      handover: false
    };
    return this.record;
  }
  /** Whole or not at all; a record that cannot be written costs status its lines, nothing more. */
  writeRecord() {
    const path = this.recordPath;
    if (!path || !this.record) return;
    try {
      mkdirSync(dirname2(path), { recursive: true, mode: 448 });
      const temporary = `${path}.${process.pid}.tmp`;
      writeFileSync2(temporary, JSON.stringify(this.record), { mode: 384 });
      renameSync2(temporary, path);
    } catch {
    }
  }
  gaveUpMessage() {
    if (this.startFailure !== void 0) return this.startFailure;
    const times = this.crashes === 1 ? "once" : `${this.crashes} times`;
    const healed = this.crashes - this.counted;
    const counted = healed > 0 ? `, ${this.counted} of them failing a memory call` : "";
    return sentences(
      `memory is off for the rest of this session: the pimem bridge stopped ${times}${counted}${this.lastCrash ? ` (last: ${this.lastCrash})` : ""}`,
      "The exchanges from now on are kept: the next pi session in this project captures them",
      'Run "pimem status" in the project to see the failures',
      "A new pi session (/new) turns memory on again"
    );
  }
};
function withDeadline(promise, ms, fallback, onLate) {
  return new Promise((resolve, reject) => {
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
      (error) => {
        clearTimeout(timer);
        reject(error);
      }
    );
  });
}

// src/host-model.ts
function modelCatalog(ctx) {
  const describe = (model) => ({
    provider: model.provider,
    id: model.id,
    input_cost: model.cost?.input ?? 0,
    output_cost: model.cost?.output ?? 0
  });
  let models = [];
  try {
    models = ctx.modelRegistry?.getAvailable() ?? [];
  } catch {
    models = [];
  }
  return { model: ctx.model ? describe(ctx.model) : void 0, models: models.map(describe) };
}
async function completeWithRegistry(registry, params, complete) {
  const wanted = params.model;
  if (!registry || !wanted?.provider || !wanted.id) throw new Error("no model registry to run the completion with");
  const model = registry.find(wanted.provider, wanted.id);
  if (!model) throw new Error(`model ${wanted.provider}/${wanted.id} is not in pi's model registry`);
  let apiKey;
  let headers;
  if (registry.getApiKeyAndHeaders) {
    const auth = await registry.getApiKeyAndHeaders(model);
    if (!auth.ok) throw new Error(auth.error ?? `no credentials for ${model.provider}`);
    apiKey = auth.apiKey;
    headers = auth.headers;
  }
  const timeoutMs = typeof params.timeout_ms === "number" ? params.timeout_ms : 3e4;
  const text2 = await complete({
    model,
    system: String(params.system ?? ""),
    prompt: String(params.prompt ?? ""),
    apiKey,
    headers,
    signal: AbortSignal.timeout(timeoutMs)
  });
  return { text: text2 };
}
function piCompletion() {
  let loading;
  const load = () => {
    loading ??= import("@mariozechner/pi-ai").catch((error) => {
      loading = void 0;
      throw error;
    });
    return loading;
  };
  return {
    complete: (request) => load().then((ai) => completeWith(ai, request)),
    prepare: () => void load().catch(() => {
    })
  };
}
async function completeWith(ai, request) {
  const message = await ai.complete(
    request.model,
    {
      systemPrompt: request.system,
      messages: [{ role: "user", content: [{ type: "text", text: request.prompt }], timestamp: Date.now() }]
    },
    { apiKey: request.apiKey, headers: request.headers, signal: request.signal }
  );
  if (message.stopReason === "error" || message.stopReason === "aborted") {
    throw new Error(message.errorMessage ?? `the model stopped: ${message.stopReason}`);
  }
  return message.content.filter((block) => block.type === "text" && typeof block.text === "string").map((block) => block.text).join("\n");
}

// src/tools.ts
var TOOL_TIMEOUT_MS = 12e4;
var COMPACT_TIMEOUT_MS = 3e5;
function string(options = {}) {
  return { type: "string", ...options };
}
function integer(options = {}) {
  return { type: "integer", ...options };
}
function object(required, optional = {}) {
  const names = Object.keys(required);
  return { type: "object", ...names.length > 0 ? { required: names } : {}, properties: { ...required, ...optional } };
}
function oneOf(values, description) {
  return string({ enum: values, ...description ? { description } : {} });
}
var TOOLS = [
  {
    name: "memory_search",
    label: "Memory search",
    description: "Search what agents recorded in this project's memory in earlier sessions: decisions, fixes, preferences.",
    parameters: object(
      { query: string({ minLength: 1, pattern: "\\S" }) },
      {
        scope: oneOf(["project", "all"], '"all": every project under PI_MEMSEARCH_SCAN_ROOTS'),
        top_k: integer({ minimum: 1, description: "Default 5" })
      }
    ),
    method: "memory.search",
    params: (args) => {
      if (typeof args.query !== "string" || !args.query.trim()) {
        throw new Error("memory_search needs a query: at least one word to look for");
      }
      return args;
    }
  },
  {
    name: "memory_expand",
    label: "Memory expand",
    description: "The whole entry behind a memory_search hit's chunk hash, and its anchor for memory_transcript.",
    parameters: object(
      { chunk_hash: string() },
      { project: string({ description: "For another project's hit: its label" }) }
    ),
    method: "memory.expand"
  },
  {
    name: "memory_transcript",
    label: "Memory transcript",
    description: "The session turns an entry was distilled from: the transcript and turn of its anchor.",
    parameters: object(
      { transcript_path: string() },
      {
        turn: string({ description: "Entry id or prefix" }),
        context: integer({ minimum: 0, description: "Turns either side (default 3)" }),
        limit: integer({ minimum: 1, description: "Turns without a turn (default 20)" })
      }
    ),
    method: "memory.transcript"
  },
  {
    name: "memory_write",
    label: "Memory write",
    description: "Append an entry to today's memory file; exchanges are captured on their own.",
    parameters: object({
      content: string({ description: "Third-person markdown bullets, in the conversation's language" })
    }),
    method: "memory.write",
    params: (args, ctx) => ({ ...args, turn: ctx.sessionManager.getLeafId() ?? null })
  },
  {
    name: "memory_forget",
    label: "Memory forget",
    description: "Delete one memory entry for good, by chunk hash or by date and time; only when the user asks.",
    parameters: object(
      {},
      {
        chunk_hash: string(),
        date: string({ description: "YYYY-MM-DD" }),
        time: string({ description: "HH:MM" })
      }
    ),
    method: "memory.forget"
  },
  {
    name: "memory_compact",
    label: "Memory compact",
    description: "Summarize the project's memory files (not the conversation) into one entry; only when the user asks.",
    parameters: object({}),
    method: "memory.compact",
    timeoutMs: COMPACT_TIMEOUT_MS
  },
  {
    name: "memory_status",
    label: "Memory status",
    description: "Memory's health in this project (failures, capture, index) and its setup.",
    parameters: object({}),
    method: "memory.status"
  },
  {
    name: "memory_skills",
    label: "Memory skills",
    description: "Skill candidates drafted from memory: list, show one, or install one the user approved.",
    parameters: object(
      { action: oneOf(["list", "show", "install"]) },
      { name: string(), to: string({ description: "The skills directory the user chose" }) }
    ),
    method: "memory.skills"
  }
];
var TOOL_NAMES = TOOLS.map((tool) => tool.name);
function text(value, details = {}) {
  return { content: [{ type: "text", text: value }], details };
}
function registerTools(pi, connection, timing) {
  for (const spec of TOOLS) {
    pi.registerTool({
      name: spec.name,
      label: spec.label,
      description: spec.description,
      parameters: spec.parameters,
      async execute(_id, args, signal, onUpdate, ctx) {
        const started = performance.now();
        const params = spec.params ? spec.params(args, ctx) : args;
        try {
          const { text: answer, ...details } = await connection.request(spec.method, params, "tool", {
            timeoutMs: spec.timeoutMs ?? TOOL_TIMEOUT_MS,
            signal,
            onProgress: (progress) => onUpdate?.(text(progress))
          });
          return text(String(answer ?? ""), details);
        } catch (error) {
          if (error instanceof BridgeError && error.type === "unavailable") return text(error.message);
          const said = error instanceof Error ? error.message : String(error);
          throw new Error(/^memory \w+ (failed|timed out)/.test(said) ? said : `${spec.name} failed: ${said}`);
        } finally {
          timing?.(spec.name, performance.now() - started);
        }
      }
    });
  }
}

// src/extension.ts
var PROMPT_WAIT_MS = 300;
var FIRST_PROMPT_WAIT_MS = 3e3;
var SHUTDOWN_CAP_MS = 16e3;
var SWITCH_CAPTURE_WAIT_MS = 4e3;
var PRINT_EXIT_CAPTURE_WAIT_MS = 4e3;
var SAY_WAIT_AFTER_MS = 300;
var PRINT_SAVING = `saving the last exchange to memory (at most ${PRINT_EXIT_CAPTURE_WAIT_MS / 1e3} s)`;
var EXIT_SETTLE_MS = 100;
var STATUS_KEY = "pimem";
var SAVING_STATUS = `pimem: saving the last exchange to memory (at most ${SWITCH_CAPTURE_WAIT_MS / 1e3} s)`;
var SHUTDOWN_GRACE_MS = 2e3;
var SETTLED_TIMEOUT_MS = 2e3;
var HIDDEN_MESSAGE_TYPE = "pimem-context";
function defaultDependencies(env = process.env, packageRoot) {
  const file = env.PIMEM_PI_TIMINGS;
  const timing = file ? (step, ms) => appendFileSync(file, `${JSON.stringify({ step, ms })}
`) : void 0;
  const host = piCompletion();
  return { ...resolveCommand(env, packageRoot), env, complete: host.complete, prepareComplete: host.prepare, timing };
}
function timed(step, timing, handler) {
  if (!timing) return handler;
  return (event, ctx) => {
    const started = performance.now();
    const result = handler(event, ctx);
    const report = () => timing(step, performance.now() - started);
    if (result instanceof Promise) result.finally(report).catch(() => {
    });
    else report();
    return result;
  };
}
function notifyUser(ctx, message, stderr, level = "warning") {
  const text2 = `pimem: ${message}`;
  try {
    if (ctx?.hasUI && typeof ctx.ui?.notify === "function") {
      ctx.ui.notify(text2, level);
      return;
    }
  } catch {
  }
  stderr(text2);
}
function setStatus(ctx, text2) {
  try {
    if (ctx?.hasUI) ctx.ui?.setStatus?.(STATUS_KEY, text2);
  } catch {
  }
}
var writeStderr = (line) => {
  process.stderr.write(`${line}
`);
};
function createPimemExtension(pi, deps) {
  let registry;
  let sessionCtx;
  let prompts = 0;
  let lastSnapshot;
  let settledEventExists = false;
  let runToSettle = false;
  let told = /* @__PURE__ */ new Set();
  const connection = new Connection({
    command: deps.command,
    recordedIn: deps.recordedIn,
    env: deps.env,
    spawn: deps.spawn,
    onReady: deps.timing && ((ms) => deps.timing?.("bridge_ready", ms)),
    // Known within moments of session_start (a missing command at once): the one notice.
    onStartFailure: (message) => notifyUser(sessionCtx, message, deps.stderr ?? writeStderr),
    onGiveUp: (message) => notifyUser(sessionCtx, message, deps.stderr ?? writeStderr),
    // Said once a session, as it happens: a line added to .gitattributes, a redaction.
    onNotice: (text2, key) => {
      if (told.has(key ?? text2)) return;
      told.add(key ?? text2);
      notifyUser(sessionCtx, text2.replace(/^pimem /, ""), deps.stderr ?? writeStderr, "info");
    },
    onHostRequest: (method, params) => method === "complete" ? completeWithRegistry(registry, params, deps.complete) : Promise.reject(new Error(`pi does not answer "${method}"`))
  });
  const takeRecall = registerCommands(pi, (ctx, message) => notifyUser(ctx, message, deps.stderr ?? writeStderr));
  const settle = (ctx) => {
    runToSettle = false;
    const leaf = ctx.sessionManager.getLeafId();
    if (!leaf) return Promise.resolve();
    return connection.request("session.settled", { leaf }, "background", { timeoutMs: SETTLED_TIMEOUT_MS }).catch(() => void 0);
  };
  pi.on("session_start", async (_event, ctx) => {
    registry = ctx.modelRegistry;
    const sessionId = ctx.sessionManager.getSessionId();
    if (connection.sessionId === sessionId) return;
    if (connection.sessionId !== void 0) {
      setStatus(ctx, SAVING_STATUS);
      await connection.close(SHUTDOWN_CAP_MS, SHUTDOWN_GRACE_MS, { captureWaitMs: SWITCH_CAPTURE_WAIT_MS });
      setStatus(ctx, void 0);
    }
    prompts = 0;
    told = /* @__PURE__ */ new Set();
    lastSnapshot = void 0;
    sessionCtx = ctx;
    connection.open({
      session_id: sessionId,
      cwd: ctx.cwd,
      transcript: ctx.sessionManager.getSessionFile() ?? null,
      ...modelCatalog(ctx)
    });
  });
  pi.on("before_agent_start", timed("before_agent_start", deps.timing, async (event) => {
    runToSettle = true;
    const recall = takeRecall(event.prompt);
    const wait = prompts++ === 0 ? FIRST_PROMPT_WAIT_MS : PROMPT_WAIT_MS;
    const kept = () => promptAdditions(event, { snapshot: lastSnapshot }, recall);
    if (!await connection.whenStarted(wait)) return kept();
    try {
      const answer = await connection.request("session.before_prompt", { prompt: event.prompt }, "prompt", {
        timeoutMs: PROMPT_WAIT_MS
      });
      if (typeof answer.snapshot === "string") lastSnapshot = answer.snapshot;
      return promptAdditions(event, answer, recall);
    } catch {
      return kept();
    }
  }));
  const unsubscribe = pi.on("agent_settled", timed("agent_settled", deps.timing, (_event, ctx) => {
    settledEventExists = true;
    void settle(ctx);
  }));
  settledEventExists = typeof unsubscribe === "function";
  pi.on("agent_end", (_event, ctx) => {
    if (!settledEventExists) void settle(ctx);
  });
  pi.on("before_provider_request", () => {
    if (deps.prepareComplete) setTimeout(deps.prepareComplete, 0);
  });
  pi.on("session_compact", () => {
    connection.request("session.compacted", {}, "background", { timeoutMs: SETTLED_TIMEOUT_MS }).catch(() => {
    });
  });
  pi.on("session_shutdown", async (_event, ctx) => {
    if (!settledEventExists && runToSettle) await withDeadline(settle(ctx), EXIT_SETTLE_MS, void 0);
    if (ctx.hasUI || prompts === 0) {
      await connection.close(0, 0, { detach: true, captureWaitMs: 0, answered: false });
      return;
    }
    const say = setTimeout(() => notifyUser(ctx, PRINT_SAVING, deps.stderr ?? writeStderr), SAY_WAIT_AFTER_MS);
    const capMs = PRINT_EXIT_CAPTURE_WAIT_MS + 2e3;
    void connection.close(capMs, SHUTDOWN_GRACE_MS, { detach: true, captureWaitMs: PRINT_EXIT_CAPTURE_WAIT_MS }).catch(() => void 0).finally(() => clearTimeout(say));
  });
  registerTools(pi, connection, deps.timing);
  return connection;
}
function promptAdditions(event, answer, recall) {
  const result = {};
  if (typeof answer.snapshot === "string" && answer.snapshot) {
    result.systemPrompt = `${event.systemPrompt}

${answer.snapshot}`;
  }
  const hidden = Array.isArray(answer.hidden) ? answer.hidden : [];
  const texts = [recall, ...hidden.map((item) => item.text)].filter(
    (text2) => typeof text2 === "string" && text2 !== ""
  );
  if (texts.length > 0) {
    result.message = { customType: HIDDEN_MESSAGE_TYPE, content: texts.join("\n\n"), display: false };
  }
  return result.systemPrompt || result.message ? result : void 0;
}

// src/pimem.ts
var PACKAGE_ROOT = fileURLToPath(new URL("..", import.meta.url));
function pimem(pi) {
  createPimemExtension(pi, defaultDependencies(process.env, PACKAGE_ROOT)).prepare(process.cwd());
}
export {
  pimem as default
};
