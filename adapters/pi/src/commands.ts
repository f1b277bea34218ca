// `/recall`: the prompt template (prompts/recall.md) asks the model to answer from memory. With
// nothing to look for, pi would still send it, and the model's memory_search would fail on an
// empty query. That input is stopped here and the user is shown how to use `/recall` instead.
//
// This is an `input` handler rather than a command of its own (`pi.registerCommand`): a command
// that sends the prompt with `pi.sendUserMessage` starts a run pi does not wait for, so in print
// mode (`pi -p "/recall …"`) pi 1.x exits before asking the model and 0.73 before printing its
// answer. pi runs `input` handlers before it expands templates, in every mode, so a query still
// takes pi's own path: the template, queued while the agent works, awaited in print mode.

import type { ContextLike, PiLike } from "./pi.ts";

/** The template's argument hint, and what the usage shows. */
export const RECALL_SYNTAX = "/recall [--all] <query>";

export const RECALL_USAGE =
  `/recall needs a query: ${RECALL_SYNTAX}, where --all searches every project under ` +
  "PI_MEMSEARCH_SCAN_ROOTS, not only this one. Nothing was sent to the model.";

export interface InputEvent {
  text: string;
}

export type InputResult = { action: "handled" } | undefined;

/** Shows the user one message: pi's notification when there is a UI, else a line on stderr. */
export type Notify = (ctx: ContextLike, message: string) => void;

/** True for `/recall` given nothing to look for: no words, or only `--all` (quotes aside). */
export function isBareRecall(text: string): boolean {
  const match = /^\/recall(?:\s+([\s\S]*))?$/.exec(text);
  if (!match) return false;
  const words = (match[1] ?? "").replace(/["']/g, " ").split(/\s+/);
  return words.every((word) => word === "" || word === "--all");
}

export function registerCommands(pi: PiLike, notify: Notify): void {
  pi.on("input", (event: InputEvent, ctx): InputResult => {
    if (!isBareRecall(event.text)) return undefined;
    notify(ctx, RECALL_USAGE);
    return { action: "handled" };
  });
}
