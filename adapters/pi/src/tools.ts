// The eight memory tools. Each one is a request to pimem; what pimem answers in `text` is what
// the agent reads, the rest of the answer goes into the tool result's details.

import { Type } from "typebox";
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

/** A string that is one of *values*: a JSON Schema enum, shorter than a union of literals, and
 * the form pi recommends for every provider (pi-ai's StringEnum). */
function oneOf<const T extends string>(values: readonly T[], description?: string) {
  return Type.Unsafe<T>({ type: "string", enum: values, ...(description ? { description } : {}) });
}

const TOOLS: ToolSpec[] = [
  {
    name: "memory_search",
    label: "Memory search",
    description:
      "Search what agents recorded in this project's memory in earlier sessions: decisions, fixes, preferences.",
    parameters: Type.Object({
      query: Type.String({ minLength: 1, pattern: "\\S" }),
      scope: Type.Optional(oneOf(["project", "all"], '"all": every project under PI_MEMSEARCH_SCAN_ROOTS')),
      top_k: Type.Optional(Type.Integer({ minimum: 1, description: "Default 5" })),
    }),
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
    parameters: Type.Object({
      chunk_hash: Type.String(),
      project: Type.Optional(Type.String({ description: "For another project's hit: its label" })),
    }),
    method: "memory.expand",
  },
  {
    name: "memory_transcript",
    label: "Memory transcript",
    description: "The session turns an entry was distilled from: the transcript and turn of its anchor.",
    parameters: Type.Object({
      transcript_path: Type.String(),
      turn: Type.Optional(Type.String({ description: "Entry id or prefix" })),
      context: Type.Optional(Type.Integer({ minimum: 0, description: "Turns either side (default 3)" })),
      limit: Type.Optional(Type.Integer({ minimum: 1, description: "Turns without a turn (default 20)" })),
    }),
    method: "memory.transcript",
  },
  {
    name: "memory_write",
    label: "Memory write",
    description: "Append an entry to today's memory file; exchanges are captured on their own.",
    parameters: Type.Object({
      content: Type.String({ description: "Third-person markdown bullets, in the conversation's language" }),
    }),
    method: "memory.write",
    params: (args, ctx) => ({ ...args, turn: ctx.sessionManager.getLeafId() ?? null }),
  },
  {
    name: "memory_forget",
    label: "Memory forget",
    description: "Delete one memory entry for good, by chunk hash or by date and time; only when the user asks.",
    parameters: Type.Object({
      chunk_hash: Type.Optional(Type.String()),
      date: Type.Optional(Type.String({ description: "YYYY-MM-DD" })),
      time: Type.Optional(Type.String({ description: "HH:MM" })),
    }),
    method: "memory.forget",
  },
  {
    name: "memory_compact",
    label: "Memory compact",
    description: "Summarize the project's memory files (not the conversation) into one entry; only when the user asks.",
    parameters: Type.Object({}),
    method: "memory.compact",
    timeoutMs: COMPACT_TIMEOUT_MS,
  },
  {
    name: "memory_status",
    label: "Memory status",
    description: "Memory's health in this project (failures, capture, index) and its setup.",
    parameters: Type.Object({}),
    method: "memory.status",
  },
  {
    name: "memory_skills",
    label: "Memory skills",
    description: "Skill candidates drafted from memory: list, show one, or install one the user approved.",
    parameters: Type.Object({
      action: oneOf(["list", "show", "install"]),
      name: Type.Optional(Type.String()),
      to: Type.Optional(Type.String({ description: "The skills directory the user chose" })),
    }),
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
