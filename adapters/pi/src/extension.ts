// pi's events, translated into pimem's session lifecycle. No memory logic lives here.

import { appendFileSync } from "node:fs";
import type { Spawn } from "./bridge.ts";
import { resolveCommand } from "./command.ts";
import { registerCommands } from "./commands.ts";
import { Connection, withDeadline } from "./connection.ts";
import { type Complete, completeWithRegistry, modelCatalog, piCompletion } from "./host-model.ts";
import type { BeforeAgentStartEvent, BeforeAgentStartResult, ContextLike, ModelRegistryLike, PiLike } from "./pi.ts";
import { registerTools } from "./tools.ts";

/** How long a prompt waits for memory; after that it goes on without it. */
export const PROMPT_WAIT_MS = 300;
/** The first prompt of a session may also wait for the bridge to come up. */
export const FIRST_PROMPT_WAIT_MS = 3_000;
/** pimem flushes capture and indexing within 15 s; the reply gets a little slack. */
export const SHUTDOWN_CAP_MS = 16_000;
/** How long a session switch (`/new`, `/resume`) waits for the last exchange's capture; what
 * is not written by then stays in pimem's journal, and the new session captures it. pi's exit
 * waits for none of it (ADR 0028). */
export const SWITCH_CAPTURE_WAIT_MS = 4_000;
/** In print and json modes (no UI: a script waits for pi, not a person) exit still waits for
 * the last exchange's capture, this long: a one-prompt run would otherwise never have it
 * captured, each run handing it to the next. */
export const PRINT_EXIT_CAPTURE_WAIT_MS = 4_000;
/** After this long waiting at exit in those modes, one line on stderr says why. */
export const SAY_WAIT_AFTER_MS = 300;
export const PRINT_SAVING = `saving the last exchange to memory (at most ${PRINT_EXIT_CAPTURE_WAIT_MS / 1000} s)`;
/** pi 0.73 settles its last run at exit (it has no agent_settled): pimem journals it in
 * milliseconds; past this, the exit goes on (pimem handles a settle sent before the shutdown
 * first all the same). */
export const EXIT_SETTLE_MS = 100;
/** The key of the adapter's line in pi's footer. */
export const STATUS_KEY = "pimem";
export const SAVING_STATUS = `pimem: saving the last exchange to memory (at most ${SWITCH_CAPTURE_WAIT_MS / 1000} s)`;
/** After stdin ends, pimem has this long to exit before it is killed. */
export const SHUTDOWN_GRACE_MS = 2_000;
const SETTLED_TIMEOUT_MS = 2_000;
export const HIDDEN_MESSAGE_TYPE = "pimem-context";

export interface Dependencies {
  /** The `pimem` command (`PIMEM_BIN`, else the one `pimem setup pi` recorded, else on PATH). */
  command: string;
  /** The record `command` came from, when `pimem setup pi` named it. */
  recordedIn?: string;
  env: NodeJS.ProcessEnv;
  complete: Complete;
  /** Loads what `complete` needs, ahead of its first call. */
  prepareComplete?: () => void;
  spawn?: Spawn;
  /** Receives how long each measured step took (for the latency benchmark). */
  timing?: (step: string, ms: number) => void;
  /** Where a notice goes when pi has no UI to show it (print and json modes): one line each. */
  stderr?: (line: string) => void;
}

/** What the extension uses in pi; `packageRoot` is this package's directory. */
export function defaultDependencies(env: NodeJS.ProcessEnv = process.env, packageRoot?: string): Dependencies {
  const file = env.PIMEM_PI_TIMINGS;
  const timing = file
    ? (step: string, ms: number) => appendFileSync(file, `${JSON.stringify({ step, ms })}\n`)
    : undefined;
  const host = piCompletion();
  return { ...resolveCommand(env, packageRoot), env, complete: host.complete, prepareComplete: host.prepare, timing };
}

/** Runs `handler`, reporting how long it took until it returned (or its promise settled). */
function timed<E, R>(
  step: string,
  timing: Dependencies["timing"],
  handler: (event: E, ctx: ContextLike) => R,
): (event: E, ctx: ContextLike) => R {
  if (!timing) return handler;
  return (event, ctx) => {
    const started = performance.now();
    const result = handler(event, ctx);
    const report = () => timing(step, performance.now() - started);
    if (result instanceof Promise) result.finally(report).catch(() => {});
    else report();
    return result;
  };
}

/** Tells the user something once: in pi's UI when there is one, else as a line on stderr. */
export function notifyUser(
  ctx: ContextLike | undefined,
  message: string,
  stderr: (line: string) => void,
  level: "info" | "warning" = "warning",
): void {
  const text = `pimem: ${message}`;
  try {
    if (ctx?.hasUI && typeof ctx.ui?.notify === "function") {
      ctx.ui.notify(text, level);
      return;
    }
  } catch {
    // a context pi no longer serves: the line below still reaches the user
  }
  stderr(text);
}

/** pi's footer line for the adapter; nothing where pi has no UI. */
function setStatus(ctx: ContextLike | undefined, text: string | undefined): void {
  try {
    if (ctx?.hasUI) ctx.ui?.setStatus?.(STATUS_KEY, text);
  } catch {
    // a context pi no longer serves
  }
}

const writeStderr = (line: string) => {
  process.stderr.write(`${line}\n`);
};

export function createPimemExtension(pi: PiLike, deps: Dependencies): Connection {
  let registry: ModelRegistryLike | undefined;
  let sessionCtx: ContextLike | undefined;
  let prompts = 0;
  // The session's last snapshot: a prompt that cannot reach the bridge (restarting after a
  // crash) keeps the same system prompt, and with it the provider's prompt cache.
  let lastSnapshot: string | undefined;
  let settledEventExists = false;
  // Whether an agent run began since the last settle: a pi 0.73 session that ends without one
  // (a prompt an input handler took, say) has nothing to capture.
  let runToSettle = false;
  // What pimem did that the user was told this session (a notice's kind, else its text): once.
  let told = new Set<string>();

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
    onNotice: (text, key) => {
      if (told.has(key ?? text)) return;
      told.add(key ?? text);
      // "pimem added ..." reads "pimem: added ..." under the adapter's prefix.
      notifyUser(sessionCtx, text.replace(/^pimem /, ""), deps.stderr ?? writeStderr, "info");
    },
    onHostRequest: (method, params) =>
      method === "complete"
        ? completeWithRegistry(registry, params, deps.complete)
        : Promise.reject(new Error(`pi does not answer "${method}"`)),
  });

  const takeRecall = registerCommands(pi, (ctx, message) => notifyUser(ctx, message, deps.stderr ?? writeStderr));

  const settle = (ctx: ContextLike): Promise<unknown> => {
    runToSettle = false;
    const leaf = ctx.sessionManager.getLeafId();
    if (!leaf) return Promise.resolve();
    return connection
      .request("session.settled", { leaf }, "background", { timeoutMs: SETTLED_TIMEOUT_MS })
      .catch(() => undefined); // capture is best effort; the session goes on
  };

  pi.on("session_start", async (_event, ctx) => {
    registry = ctx.modelRegistry;
    const sessionId = ctx.sessionManager.getSessionId();
    if (connection.sessionId === sessionId) return; // pi 0.73 may announce a session twice
    if (connection.sessionId !== undefined) {
      setStatus(ctx, SAVING_STATUS);
      await connection.close(SHUTDOWN_CAP_MS, SHUTDOWN_GRACE_MS, { captureWaitMs: SWITCH_CAPTURE_WAIT_MS });
      setStatus(ctx, undefined);
    }
    prompts = 0;
    told = new Set();
    lastSnapshot = undefined;
    sessionCtx = ctx;
    connection.open({
      session_id: sessionId,
      cwd: ctx.cwd,
      transcript: ctx.sessionManager.getSessionFile() ?? null,
      ...modelCatalog(ctx),
    });
  });

  pi.on("before_agent_start", timed("before_agent_start", deps.timing, async (event: BeforeAgentStartEvent) => {
    runToSettle = true;
    // Said to the model whether memory answers or not: the skill's tools say the rest.
    const recall = takeRecall(event.prompt);
    const wait = prompts++ === 0 ? FIRST_PROMPT_WAIT_MS : PROMPT_WAIT_MS;
    const kept = () => promptAdditions(event, { snapshot: lastSnapshot }, recall);
    if (!(await connection.whenStarted(wait))) return kept();
    try {
      const answer = await connection.request("session.before_prompt", { prompt: event.prompt }, "prompt", {
        timeoutMs: PROMPT_WAIT_MS,
      });
      if (typeof answer.snapshot === "string") lastSnapshot = answer.snapshot;
      return promptAdditions(event, answer, recall);
    } catch {
      return kept(); // the prompt goes on with the snapshot it had, and no other memory
    }
  }));

  // pi 1.x says when it will not continue on its own; 0.73 only has agent_end (which can even
  // come after shutdown in print mode), so there capture is also flushed at shutdown.
  const unsubscribe = pi.on("agent_settled", timed("agent_settled", deps.timing, (_event: unknown, ctx) => {
    settledEventExists = true;
    void settle(ctx);
  }));
  settledEventExists = typeof unsubscribe === "function";
  pi.on("agent_end", (_event, ctx) => {
    if (!settledEventExists) void settle(ctx);
  });

  // pi's model module loads while the agent waits for its model (the timer lets the request
  // go first), not when the last exchange is distilled at exit.
  pi.on("before_provider_request", () => {
    if (deps.prepareComplete) setTimeout(deps.prepareComplete, 0);
  });

  pi.on("session_compact", () => {
    connection.request("session.compacted", {}, "background", { timeoutMs: SETTLED_TIMEOUT_MS }).catch(() => {});
  });

  pi.on("session_shutdown", async (_event, ctx) => {
    // Where a person waits (pi's UI), exit waits on no memory (ADR 0028): the exchange in
    // flight is journaled at once and distilled later, by the next session or by pimem without
    // pi. pi 0.73's last settle is the one thing sent first, and only briefly waited for.
    if (!settledEventExists && runToSettle) await withDeadline(settle(ctx), EXIT_SETTLE_MS, undefined);
    if (ctx.hasUI || prompts === 0) {
      // With no run in the session there is no exchange to wait for either.
      await connection.close(0, 0, { detach: true, captureWaitMs: 0, answered: false });
      return;
    }
    // In print and json modes the process still lives until the last exchange is captured, but
    // pi's own shutdown is not held up for it: the handler returns at once and the bridge, still
    // referenced, keeps node running until pimem answers (ADR 0028).
    const say = setTimeout(() => notifyUser(ctx, PRINT_SAVING, deps.stderr ?? writeStderr), SAY_WAIT_AFTER_MS);
    const capMs = PRINT_EXIT_CAPTURE_WAIT_MS + 2_000;
    void connection
      .close(capMs, SHUTDOWN_GRACE_MS, { detach: true, captureWaitMs: PRINT_EXIT_CAPTURE_WAIT_MS })
      .catch(() => undefined)
      .finally(() => clearTimeout(say));
  });

  registerTools(pi, connection, deps.timing);
  return connection;
}

/** The snapshot after the system prompt; `recall` (a `/recall` instruction), then pimem's
 * hidden context, as one message the user does not see (pi takes one message an extension). */
function promptAdditions(
  event: BeforeAgentStartEvent,
  answer: Record<string, unknown>,
  recall?: string,
): BeforeAgentStartResult | undefined {
  const result: BeforeAgentStartResult = {};
  if (typeof answer.snapshot === "string" && answer.snapshot) {
    result.systemPrompt = `${event.systemPrompt}\n\n${answer.snapshot}`;
  }
  const hidden = Array.isArray(answer.hidden) ? (answer.hidden as { text?: unknown }[]) : [];
  const texts = [recall, ...hidden.map((item) => item.text)].filter(
    (text): text is string => typeof text === "string" && text !== "",
  );
  if (texts.length > 0) {
    result.message = { customType: HIDDEN_MESSAGE_TYPE, content: texts.join("\n\n"), display: false };
  }
  return result.systemPrompt || result.message ? result : undefined;
}
