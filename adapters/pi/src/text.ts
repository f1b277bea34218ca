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
