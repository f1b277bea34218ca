// Sentences joined for people and agents: one full stop at each end, never two.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { sentence, sentences, takeLines } from "../src/text.ts";

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

describe("takeLines", () => {
  test("splits on newlines only and keeps what follows the last one", () => {
    assert.deepEqual(takeLines('{"a":"x\u2028y"}\n{"b":1}\n{"c"'), { lines: ['{"a":"x\u2028y"}', '{"b":1}'], rest: '{"c"' });
    assert.deepEqual(takeLines(""), { lines: [], rest: "" });
  });
});
