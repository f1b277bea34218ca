"""An entry's context in ranking: neighbours, the store's context share, stemmed words and the
entry's day (unit vectors stand in for the embedding model)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from pimem_plugins.memsearch.recall import cache
from pimem_plugins.memsearch.recall.generation import ChunkRecord, Generation
from pimem_plugins.memsearch.recall.ranking import ALONE, IN_CONTEXT, rank, weights_for
from pimem_plugins.memsearch.recall.read_model import ReadModel
from pimem_plugins.memsearch.recall.text import day_words, lexical_words, stem, tokens

DIMENSION = 16


def vector(*hot: int) -> npt.NDArray[np.float32]:
    found = np.zeros(DIMENSION, np.float32)
    found[list(hot)] = 1.0
    return (found / np.linalg.norm(found)).reshape(1, -1)


def turn(
    key: str, text: str, *, line: int, session: str = "s1", source: str = "/m/2023-05-03.md"
) -> ChunkRecord:
    return ChunkRecord(
        chunk_hash=key,
        content=f"### 10:00\n<!-- session:{session} turn:{key} transcript:/t.jsonl -->\n- {text}",
        source=source,
        heading="10:00",
        heading_level=3,
        start_line=line,
        end_line=line + 2,
        facts_ready=True,
    )


@pytest.mark.parametrize(
    ("words", "stems"),
    [
        ("donate donated donates", ["donat"] * 3),
        ("cache caches cached", ["cach"] * 3),
        ("parties tried", ["party", "try"]),
        ("planned billing logging", ["plan", "billing", "logging"]),
        ("class status business", ["class", "status", "business"]),
        ("James Jolene", ["jame", "jolen"]),
    ],
)
def test_a_word_and_its_endings_are_one_word(words: str, stems: list[str]) -> None:
    assert [stem(word) for word in words.lower().split()] == stems


def test_short_words_numbers_and_compounds_are_not_stemmed() -> None:
    assert tokens("uses 0.19.0 auth_service.py POST /v1/users") == [
        "uses", "0.19.0", "auth_service.py", "post", "v1/users", "v1", "user",
    ]  # fmt: skip


def test_the_day_of_a_daily_file_is_in_its_words() -> None:
    assert day_words("/p/.memsearch/memory/2023-05-03.md") == "3 may 2023"
    assert day_words("/p/.memsearch/memory/notes.md") == ""
    assert day_words("/p/2023-02-30.md") == ""  # no such day
    assert lexical_words("### 10:00\n- met Maria for dinner", "/m/2023-05-03.md") == [
        "met", "maria", "dinner", "3", "may", "2023",
    ]  # fmt: skip


def test_neighbours_are_the_entries_around_in_the_same_file_and_session() -> None:
    records = [
        turn("a", "one", line=1),
        turn("c", "three", line=13),
        turn("b", "two", line=9),
        turn("d", "another session between two and one", line=5, session="s2"),
        turn("e", "another file", line=3, source="/m/2023-05-04.md"),
    ]
    generation = Generation.build([(r, vector(i)) for i, r in enumerate(records)])
    keys = [r.chunk_hash for r in generation.records]

    def linked(links: npt.NDArray[np.int64]) -> dict[str, str | None]:
        return {k: (keys[int(j)] if j >= 0 else None) for k, j in zip(keys, links, strict=True)}

    assert linked(generation.next) == {"a": "b", "b": "c", "c": None, "d": None, "e": None}
    assert linked(generation.previous) == {"a": None, "b": "a", "c": "b", "d": None, "e": None}
    around = generation.around(np.array([keys.index("a")], np.int64))
    assert {keys[p] for p in around.tolist()} == {"a", "b", "c"}


def conversation(alike: bool) -> Generation:
    """Forty turns in pairs: each pair about one subject when *alike*, else every turn apart."""
    entries = []
    for i in range(40):
        subject = i // 2 if alike else i
        entries.append(
            (turn(f"t{i:02d}", f"turn {i}", line=1 + 4 * i), vector(subject % DIMENSION))
        )
    return Generation.build(entries)


def test_the_context_share_follows_how_alike_neighbours_are() -> None:
    assert conversation(alike=True).context_share == 1.0
    assert conversation(alike=False).context_share == 0.0


def test_weights_move_from_the_entry_alone_to_its_context() -> None:
    assert weights_for(0.0) == ALONE
    assert weights_for(1.0) == IN_CONTEXT
    half = weights_for(0.5)
    assert half.dense_context == pytest.approx(IN_CONTEXT.dense_context / 2)
    assert half.dense == pytest.approx((ALONE.dense + IN_CONTEXT.dense) / 2)


def dialogue() -> list[tuple[ChunkRecord, npt.NDArray[np.float32]]]:
    """A reply that only makes sense with the question before it, among turns of other
    sessions that are each closer to the question than the reply is."""
    return [
        (turn("q", "Which city did you move to last spring?", line=1), vector(1)),
        (turn("r", "Lisbon, and I love it.", line=5), vector(2)),
        *(
            (turn(f"x{k}", f"Something else {k}.", line=4 * k, session=f"s{k}"), near(1, k))
            for k in range(4, 8)
        ),
    ]


def near(close: int, own: int) -> npt.NDArray[np.float32]:
    """Mostly its own direction, a little of *close*'s."""
    found = 0.3 * vector(close) + vector(own)
    return found / np.linalg.norm(found)


def test_a_reply_is_found_by_the_question_next_to_it_in_a_conversation() -> None:
    generation = Generation.build(dialogue())
    generation.context_share = 1.0  # as a store of whole conversations measures
    model = ReadModel(generation)
    query = vector(1, 2)[0] * 0.2 + vector(1)[0]
    query /= np.linalg.norm(query)
    words = tokens("which city did she move to")
    found, share = model.candidates(query, words, 10)
    alone = [hit.chunk_hash for hit in rank(found, words, 6, model.idf, weights=ALONE)]
    in_context = [hit.chunk_hash for hit in rank(found, words, 6, model.idf, weights=IN_CONTEXT)]
    assert alone[0] == "q"
    assert alone[-1] == "r"
    assert in_context[:2] == ["q", "r"]
    assert share == model.generation().context_share
    legs = {leg.name for leg in rank(found, words, 1, model.idf, weights=IN_CONTEXT)[0].legs}
    assert legs == {"dense", "lexical", "dense_context", "lexical_context", "fused"}
    assert {leg.name for leg in rank(found, words, 1, model.idf)[0].legs} == {
        "dense", "lexical", "fused",
    }  # fmt: skip


def test_a_question_about_a_day_finds_that_days_entries() -> None:
    entries = [
        (turn("a", "had dinner with my mother", line=1), vector(1)),
        (turn("b", "had dinner with my mother", line=1, source="/m/2023-06-09.md"), vector(1)),
    ]
    model = ReadModel(Generation.build(entries))
    words = tokens("Who did Maria have dinner with on 3 May, 2023?")
    found, _ = model.candidates(vector(1)[0], words, 10)
    assert rank(found, words, 2, model.idf)[0].chunk_hash == "a"


def test_an_older_cache_gets_its_lexical_index_rebuilt(tmp_path: object) -> None:
    from pathlib import Path

    directory = Path(str(tmp_path)) / "read-model" / "c"
    generation = Generation.build(dialogue())
    cache.save(directory, generation, {})
    manifest = directory / "manifest.json"
    manifest.write_text(manifest.read_text().replace(f'"format": {cache.FORMAT}', '"format": 2'))
    (directory / "lexical.json").write_text('{"df": {"unstemmed": 1}, "size": 4, "average": 1}')
    saved = cache.load(directory)
    assert saved is not None
    assert saved.outdated
    assert saved.generation.lexical.idf("lisbon") < saved.generation.lexical.idf("unstemmed")
    assert saved.generation.lexical.scores(tokens("cities"))[0] > 0  # "city", stemmed
