// Sentences joined for people and agents: one full stop at each end, never two.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { sentence, sentences } from "../src/text.ts";

describe("sentences", () => {
  test("a part that already ends with a full stop gets no second one", () => {
    assert.equal(sentences("pimem could not be started.", "Set PIMEM_BIN"), "pimem could not be started. Set PIMEM_BIN.");
    assert.equal(sentences("it stopped..", "Run it again."), "it stopped. Run it again.");
  });

  test("questions and exclamations keep their mark; blanks and missing parts are left out", () => {
    assert.equal(sentence("why? "), "why?");
    assert.equal(sentences("done!", undefined, " ", "next"), "done! next.");
  });
});
