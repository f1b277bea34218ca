// pimem for pi: the extension pi loads from this package. All memory logic runs in Python
// (`pimem serve`); this side only connects pi's events and tools to it.

import { createPimemExtension, defaultDependencies } from "../src/extension.ts";
import type { PiLike } from "../src/pi.ts";

export default function pimem(pi: PiLike): void {
  createPimemExtension(pi, defaultDependencies());
}
