// Which pimem the extension runs: PIMEM_BIN when it is set, else the command `pimem setup pi`
// recorded in this package (pimem-command.json, beside package.json), else `pimem` on PATH.
// The package and the recorded command come from one pimem installation (ADR 0023).

import { readFileSync } from "node:fs";
import { join } from "node:path";

export const RECORD_NAME = "pimem-command.json";

export interface PimemCommand {
  command: string;
  /** The record it came from, when `pimem setup pi` named it. */
  recordedIn?: string;
}

/** The command to start as the bridge; `packageRoot` is this pi package's directory. */
export function resolveCommand(env: NodeJS.ProcessEnv, packageRoot?: string): PimemCommand {
  if (env.PIMEM_BIN) return { command: env.PIMEM_BIN };
  if (packageRoot !== undefined) {
    const file = join(packageRoot, RECORD_NAME);
    try {
      const recorded = (JSON.parse(readFileSync(file, "utf8")) as { command?: unknown } | null)?.command;
      if (typeof recorded === "string" && recorded !== "") return { command: recorded, recordedIn: file };
    } catch {
      // no record (a manual install), or one that cannot be read: pimem on PATH, as before
    }
  }
  return { command: "pimem" };
}
