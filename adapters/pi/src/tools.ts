// The eight memory tools. Each one is a request to pimem; what pimem answers in `text` is what
// the agent reads, the rest of the answer goes into the tool result's details.

import { Type } from "typebox";
import { BridgeError } from "./bridge.ts";
import type { Connection } from "./connection.ts";
import type { ContextLike, PiLike, ToolResult, ToolUpdate } from "./pi.ts";

export const TOOL_TIMEOUT_MS = 120_000;
export const COMPACT_TIMEOUT_MS = 300_000;

interface ToolSpec {
  name: string;
  label: string;
  description: string;
  promptSnippet: string;
  parameters: unknown;
  method: string;
  timeoutMs?: number;
  /** Turns the agent's arguments into the request's params. */
  params?: (args: Record<string, unknown>, ctx: ContextLike) => Record<string, unknown>;
}

const TOOLS: ToolSpec[] = [
  {
    name: "memory_search",
    label: "Memory search",
    description:
      "Search the project's shared memory (decisions, fixes, preferences recorded in earlier sessions, " +
      "by any agent). Returns the best chunks, each on one line with the date and time it was written, " +
      "its score and its chunk hash (for memory_expand), then its text. The heading says what the score " +
      "is: relevance (0 to 1, low when nothing fits) or rank fusion (it only orders the hits, so read " +
      "the chunks to judge them). When no hit reaches the relevance threshold (0.30), the answer opens " +
      "with a line saying so: memory then most likely holds nothing on the question, unless the line " +
      "names a close match in other words, which you should read before deciding. " +
      'scope "all" also searches the other projects under PI_MEMSEARCH_SCAN_ROOTS; use it after a ' +
      "project search found nothing or when the user asks about other projects.",
    promptSnippet: "Search the shared project memory for past decisions, fixes and context",
    parameters: Type.Object({
      query: Type.String({ minLength: 1, pattern: "\\S", description: "What to look for, in words (not empty)" }),
      scope: Type.Optional(Type.Union([Type.Literal("project"), Type.Literal("all")], { description: 'Default "project"' })),
      top_k: Type.Optional(Type.Integer({ minimum: 1, description: "How many chunks to return (default 5)" })),
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
    description:
      "Show the full memory section behind a chunk hash from memory_search: its file and lines, its " +
      "text, and its session anchor when it has one (session and turn, then the transcript path, " +
      "relative to ~ when under it; pass both to memory_transcript as shown). Pass the hit's project " +
      "label as project for hits from other projects.",
    promptSnippet: "Read the full memory section behind a memory_search hit",
    parameters: Type.Object({
      chunk_hash: Type.String({ description: "The chunk hash of a memory_search hit" }),
      project: Type.Optional(Type.String({ description: "The hit's project label, for cross-project hits" })),
    }),
    method: "memory.expand",
  },
  {
    name: "memory_transcript",
    label: "Memory transcript",
    description:
      "Read the original conversation behind a memory: the turns of a pi session file around an " +
      "entry id. Use the transcript path and turn from memory_expand's anchor.",
    promptSnippet: "Read the session turns a memory was distilled from",
    parameters: Type.Object({
      transcript_path: Type.String({ description: "The session file from a memory anchor" }),
      turn: Type.Optional(Type.String({ description: "Entry id (or a unique prefix) to centre on" })),
      context: Type.Optional(Type.Integer({ minimum: 0, description: "Turns either side of the target (default 3)" })),
      limit: Type.Optional(Type.Integer({ minimum: 1, description: "Turns to show without a target (default 20)" })),
    }),
    method: "memory.transcript",
  },
  {
    name: "memory_write",
    label: "Memory write",
    description:
      "Save something worth remembering across sessions (a decision, a convention, a user preference) " +
      "to today's memory file. Write short third-person bullets. Exchanges are captured automatically; " +
      "use this when the user asks you to remember something.",
    promptSnippet: "Save a memory entry to the shared project memory",
    parameters: Type.Object({
      content: Type.String({ description: "Markdown bullets to remember" }),
    }),
    method: "memory.write",
    params: (args, ctx) => ({ ...args, turn: ctx.sessionManager.getLeafId() ?? null }),
  },
  {
    name: "memory_forget",
    label: "Memory forget",
    description:
      "Permanently delete one memory entry: the entry behind a chunk hash, or the entry written at a " +
      "date (YYYY-MM-DD) and time (HH:MM). Only when the user asks to forget or redact something.",
    promptSnippet: "Delete one memory entry, by chunk hash or by date and time",
    parameters: Type.Object({
      chunk_hash: Type.Optional(Type.String({ description: "The chunk hash of the entry to delete" })),
      date: Type.Optional(Type.String({ description: "The entry's day, YYYY-MM-DD" })),
      time: Type.Optional(Type.String({ description: "The entry's time heading, HH:MM" })),
    }),
    method: "memory.forget",
  },
  {
    name: "memory_compact",
    label: "Memory compact",
    description:
      "Summarize the project's indexed memory into one compact entry with memsearch's compaction. " +
      "This compacts memory files, not the conversation: only when the user explicitly asks for it.",
    promptSnippet: "Compact the project's memory files (only on explicit request)",
    parameters: Type.Object({}),
    method: "memory.compact",
    timeoutMs: COMPACT_TIMEOUT_MS,
  },
  {
    name: "memory_status",
    label: "Memory status",
    description:
      "Show how memory is doing for this project, then how it is set up: first recent failures (bridge " +
      "crashes, exchanges waiting for capture), capture, index health and auto-context; then the store, " +
      "collection, backend and settings. Use it to explain why memory is not working.",
    promptSnippet: "Show memory's health (failures, capture, index) and setup for this project",
    parameters: Type.Object({}),
    method: "memory.status",
  },
  {
    name: "memory_skills",
    label: "Memory skills",
    description:
      "Review the skill candidates pimem drafted from workflows that recur in memory: list them, show one " +
      "candidate's SKILL.md, or install one into a skills directory. Install only after the user has read " +
      'the candidate and approved it, into the directory they chose ("to": .pi/skills for this project, ' +
      "~/.pi/agent/skills for every project). Candidates are never installed otherwise.",
    promptSnippet: "List, show or (on the user's approval) install skill candidates drafted from memory",
    parameters: Type.Object({
      action: Type.Union([Type.Literal("list"), Type.Literal("show"), Type.Literal("install")], {
        description: "list the candidates, show one, or install one",
      }),
      name: Type.Optional(Type.String({ description: "The candidate's name, for show and install" })),
      to: Type.Optional(Type.String({ description: "For install: the skills directory the user chose" })),
    }),
    method: "memory.skills",
  },
];

export const TOOL_NAMES = TOOLS.map((tool) => tool.name);

function text(value: string, details: Record<string, unknown> = {}): ToolResult {
  return { content: [{ type: "text", text: value }], details };
}

export function registerTools(pi: PiLike, connection: Connection): void {
  for (const spec of TOOLS) {
    pi.registerTool({
      name: spec.name,
      label: spec.label,
      description: spec.description,
      promptSnippet: spec.promptSnippet,
      parameters: spec.parameters,
      async execute(_id, args, signal, onUpdate: ToolUpdate | undefined, ctx) {
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
        }
      },
    });
  }
}
