// pimem for pi: the extension pi loads from this package. All memory logic runs in Python
// (`pimem serve`); this side only connects pi's events and tools to it.

import { fileURLToPath } from "node:url";
import { createPimemExtension, defaultDependencies } from "./extension.ts";
import type { PiLike } from "./pi.ts";

/** This package's directory, where `pimem setup pi` records which pimem to run. */
const PACKAGE_ROOT = fileURLToPath(new URL("..", import.meta.url));

export default function pimem(pi: PiLike): void {
  // Started now, it is ready by the time pi starts its session.
  createPimemExtension(pi, defaultDependencies(process.env, PACKAGE_ROOT)).prepare(process.cwd());
}
