// `/recall`: the user asks the agent to answer from memory. What the user sees as their message
// is their query; the instruction to answer it from memory goes to the model beside it, as a
// message the user does not see.
//
// pi expands a prompt template (prompts/recall.md) into the user's own message, so a template
// alone shows its instructions as what the user typed. The adapter takes `/recall` in pi's
// `input` event instead, which pi runs before it expands templates, in every mode: with nothing
// to look for, the input is handled there and the user is shown the usage; with a query, the
// input becomes the query itself (pi's `transform`), and `before_agent_start` adds the
// instruction as a hidden message. The prompt then takes pi's own path: awaited in print mode,
// queued while the agent works.
//
// This is not a command of its own (`pi.registerCommand`): a command sends its prompt with
// `pi.sendUserMessage`, a run pi does not wait for, so `pi -p "/recall <query>"` would end
// before the answer (pi 1.x before even asking the model). While the agent works, pi queues the
// prompt without a `before_agent_start`, so there the input is left to the template, which
// carries the instruction in the message itself.

import type { ContextLike, PiLike } from "./pi.ts";

/** The template's argument hint, and what the usage shows. */
export const RECALL_SYNTAX = "/recall [--all] <query>";

export const RECALL_USAGE =
  `/recall needs a query: ${RECALL_SYNTAX}, where --all searches every project under ` +
  "PI_MEMSEARCH_SCAN_ROOTS, not only this one. Nothing was sent to the model.";

/** What the model reads beside the query; pimem's capture gate knows it by its first words. */
export const RECALL_INSTRUCTION =
  "Use the recall skill to answer from memory: the user's message above is a /recall request. " +
  "Answer it from the project's shared memory (memory_search, then memory_expand and " +
  "memory_transcript as far as needed), say which day each part of the answer comes from, and " +
  "say plainly when memory holds nothing about it.";

/** Added for `/recall --all`. */
export const RECALL_EVERYWHERE =
  'It came with --all: search every project at once (memory_search with scope "all"), not this ' +
  "project first.";

export interface InputEvent {
  text: string;
}

export type InputResult = { action: "handled" } | { action: "transform"; text: string } | undefined;

/** Shows the user one message: pi's notification when there is a UI, else a line on stderr. */
export type Notify = (ctx: ContextLike, message: string) => void;

/** A `/recall` input: the query as the user typed it, and whether it searches every project. */
export interface Recall {
  query: string;
  all: boolean;
}

/** `/recall` with what follows it; undefined for any other input. */
export function parseRecall(text: string): Recall | undefined {
  const match = /^\/recall(?:\s+([\s\S]*))?$/.exec(text);
  if (!match) return undefined;
  const rest = (match[1] ?? "").trim();
  const flag = /^--all(?:\s+|$)/.exec(rest);
  return { query: flag ? rest.slice(flag[0].length).trim() : rest, all: flag !== null };
}

/** True for `/recall` given nothing to look for: no words, or only `--all` (quotes aside). */
export function isBareRecall(text: string): boolean {
  const match = /^\/recall(?:\s+([\s\S]*))?$/.exec(text);
  if (!match) return false;
  const words = (match[1] ?? "").replace(/["']/g, " ").split(/\s+/);
  return words.every((word) => word === "" || word === "--all");
}

/** The hidden message for a recall. */
export function recallInstruction(recall: Recall): string {
  return recall.all ? `${RECALL_INSTRUCTION} ${RECALL_EVERYWHERE}` : RECALL_INSTRUCTION;
}

/** The instruction for the prompt pi is about to send, when it is the query of a `/recall`. */
export type TakeRecall = (prompt: string) => string | undefined;

export function registerCommands(pi: PiLike, notify: Notify): TakeRecall {
  // The recall whose query pi is about to send: before_agent_start comes next, for that prompt.
  let pending: Recall | undefined;
  pi.on("input", (event: InputEvent, ctx): InputResult => {
    pending = undefined;
    if (isBareRecall(event.text)) {
      notify(ctx, RECALL_USAGE);
      return { action: "handled" };
    }
    const recall = parseRecall(event.text);
    // A prompt sent while the agent works is queued with no before_agent_start: the template.
    if (!recall || ctx.isIdle?.() === false) return undefined;
    pending = recall;
    return { action: "transform", text: recall.query };
  });
  return (prompt) => {
    const recall = pending;
    pending = undefined;
    return recall && recall.query === prompt ? recallInstruction(recall) : undefined;
  };
}
