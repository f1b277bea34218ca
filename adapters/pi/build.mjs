// Builds the one file pi loads, extensions/pimem.ts, from src/ (ADR 0030). It is JavaScript;
// the name makes pi's loader transform it as it does TypeScript, which maps the one module it
// imports (`@mariozechner/pi-ai`) to pi's own copy: loaded as JavaScript, Node would look for
// that module beside the file and find none.
//
//   node build.mjs           write it
//   node build.mjs --check   fail, saying so, when it is not what src/ builds to now

import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = (path) => fileURLToPath(new URL(path, import.meta.url));
const OUTPUT = here("extensions/pimem.ts");

const result = await build({
  entryPoints: [here("src/pimem.ts")],
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // pi maps its own modules for the extensions it loads; only that name is imported.
  external: ["@mariozechner/pi-ai"],
  legalComments: "none",
  banner: { js: "// Built by `npm run build` from src/ (ADR 0030): edit those files, not this one." },
  write: false,
});
const built = result.outputFiles[0].text;

if (process.argv.includes("--check")) {
  let current = "";
  try {
    current = readFileSync(OUTPUT, "utf8");
  } catch {
    // missing: reported below
  }
  if (current !== built) {
    console.error("extensions/pimem.ts is not what src/ builds to: run `npm run build` in adapters/pi");
    process.exit(1);
  }
} else {
  writeFileSync(OUTPUT, built);
}
