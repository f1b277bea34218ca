// Messages people and agents read are built from sentences; joining them here keeps one full stop
// at each end, however the parts came (a reason from pimem may or may not end with one).

/** `part` as a sentence: trimmed, ending with exactly one terminal mark. */
export function sentence(part: string): string {
  const trimmed = part.trim().replace(/\.+$/, "");
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}

/** The parts as consecutive sentences, empty parts left out. */
export function sentences(...parts: (string | undefined)[]): string {
  return parts
    .filter((part): part is string => part !== undefined && part.trim() !== "")
    .map(sentence)
    .join(" ");
}

/** The complete lines in `buffer` and what follows the last of them. Split on "\n" only: JSON
 * strings may hold U+2028, which line readers take for a break. */
export function takeLines(buffer: string): { lines: string[]; rest: string } {
  const lines = buffer.split("\n");
  const rest = lines.pop() ?? "";
  return { lines, rest };
}
