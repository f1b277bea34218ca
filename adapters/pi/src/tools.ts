// The eight memory tools. Each one is a request to pimem; what pimem answers in `text` is what
// the agent reads, the rest of the answer goes into the tool result's details.

import { BridgeError } from "./bridge.ts";
import type { Connection } from "./connection.ts";
import type { ContextLike, PiLike, ToolResult, ToolUpdate } from "./pi.ts";

export const TOOL_TIMEOUT_MS = 120_000;
export const COMPACT_TIMEOUT_MS = 300_000;

// Every request carries these definitions, so each says only what pimem knows and the schema
// does not: no one-line snippet in pi's "Available tools" beside the description, no parameter
// description that repeats its name. The answers explain themselves (a search's heading says
// what its scores are), and the skills say how to recall.
interface ToolSpec {
  name: string;
  label: string;
  description: string;
  parameters: unknown;
  method: string;
  timeoutMs?: number;
  /** Turns the agent's arguments into the request's params. */
  params?: (args: Record<string, unknown>, ctx: ContextLike) => Record<string, unknown>;
}

// The parameters are plain JSON Schema, which both pi lines validate as it is. A schema library
// imported here would be evaluated afresh in every session by pi's extension loader, which
// shares no module with pi: on pi 1.6 that alone took about 25 ms of a one-prompt run.
type Schema = Record<string, unknown>;

function string(options: Schema = {}): Schema {
  return { type: "string", ...options };
}

function integer(options: Schema = {}): Schema {
  return { type: "integer", ...options };
}

/** An object with the `required` properties, then the `optional` ones. */
function object(required: Record<string, Schema>, optional: Record<string, Schema> = {}): Schema {
  const names = Object.keys(required);
  return { type: "object", ...(names.length > 0 ? { required: names } : {}), properties: { ...required, ...optional } };
}

/** A string that is one of *values*: a JSON Schema enum, shorter than a union of literals, and
 * the form pi recommends for every provider (pi-ai's StringEnum). */
function oneOf(values: readonly string[], description?: string): Schema {
  return string({ enum: values, ...(description ? { description } : {}) });
}

const TOOLS: ToolSpec[] = [
  {
    name: "memory_search",
    label: "Memory search",
    description:
      "Search what agents recorded in this project's memory in earlier sessions: decisions, fixes, preferences.",
    parameters: object(
      { query: string({ minLength: 1, pattern: "\\S" }) },
      {
        scope: oneOf(["project", "all"], '"all": every project under PI_MEMSEARCH_SCAN_ROOTS'),
        top_k: integer({ minimum: 1, description: "Default 5" }),
      },
    ),
    method: "memory.search",
    params: (args) => {
      if (typeof args.query !== "string" || !args.query.trim()) {
        throw new Error("memory_search needs a query: at least one word to look for");
      }
      return args;
    },
  },
  {
    name: "memory_expand",
    label: "Memory expand",
    description: "The whole entry behind a memory_search hit's chunk hash, and its anchor for memory_transcript.",
    parameters: object(
      { chunk_hash: string() },
      { project: string({ description: "For another project's hit: its label" }) },
    ),
    method: "memory.expand",
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
        limit: integer({ minimum: 1, description: "Turns without a turn (default 20)" }),
      },
    ),
    method: "memory.transcript",
  },
  {
    name: "memory_write",
    label: "Memory write",
    description: "Append an entry to today's memory file; exchanges are captured on their own.",
    parameters: object({
      content: string({ description: "Third-person markdown bullets, in the conversation's language" }),
    }),
    method: "memory.write",
    params: (args, ctx) => ({ ...args, turn: ctx.sessionManager.getLeafId() ?? null }),
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
        time: string({ description: "HH:MM" }),
      },
    ),
    method: "memory.forget",
  },
  {
    name: "memory_compact",
    label: "Memory compact",
    description: "Summarize the project's memory files (not the conversation) into one entry; only when the user asks.",
    parameters: object({}),
    method: "memory.compact",
    timeoutMs: COMPACT_TIMEOUT_MS,
  },
  {
    name: "memory_status",
    label: "Memory status",
    description: "Memory's health in this project (failures, capture, index) and its setup.",
    parameters: object({}),
    method: "memory.status",
  },
  {
    name: "memory_skills",
    label: "Memory skills",
    description: "Skill candidates drafted from memory: list, show one, or install one the user approved.",
    parameters: object(
      { action: oneOf(["list", "show", "install"]) },
      { name: string(), to: string({ description: "The skills directory the user chose" }) },
    ),
    method: "memory.skills",
  },
];

export const TOOL_NAMES = TOOLS.map((tool) => tool.name);

function text(value: string, details: Record<string, unknown> = {}): ToolResult {
  return { content: [{ type: "text", text: value }], details };
}

/** `timing`, when given, hears how long each call took until it answered or failed, under
 * the tool's name (the latency benchmark's `PIMEM_PI_TIMINGS`). */
export function registerTools(
  pi: PiLike,
  connection: Connection,
  timing?: (step: string, ms: number) => void,
): void {
  for (const spec of TOOLS) {
    pi.registerTool({
      name: spec.name,
      label: spec.label,
      description: spec.description,
      parameters: spec.parameters,
      async execute(_id, args, signal, onUpdate: ToolUpdate | undefined, ctx) {
        const started = performance.now();
        const params = spec.params ? spec.params(args, ctx) : args;
        try {
          const { text: answer, ...details } = await connection.request(spec.method, params, "tool", {
            timeoutMs: spec.timeoutMs ?? TOOL_TIMEOUT_MS,
            signal,
            onProgress: (progress) => onUpdate?.(text(progress)),
          });
          return text(String(answer ?? ""), details);
        } catch (error) {
          // Missing memsearch is a normal answer: the agent relays the install instructions.
          if (error instanceof BridgeError && error.type === "unavailable") return text(error.message);
          const said = error instanceof Error ? error.message : String(error);
          // pimem's own messages may already name the operation ("memory search failed: …").
          throw new Error(/^memory \w+ (failed|timed out)/.test(said) ? said : `${spec.name} failed: ${said}`);
        } finally {
          timing?.(spec.name, performance.now() - started);
        }
      },
    });
  }
}
