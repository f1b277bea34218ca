"""pi session files: L3 transcript rendering (TC-35) and the branch capture reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pimem_core import Pimem, PimemError
from pimem_core.errors import TranscriptNotHere
from pimem_core.render import render_transcript, transcript_to_json
from pimem_core.service_values import Transcript, TranscriptRequest
from pimem_core.types import BranchEntry
from pimem_plugins.pi_transcript import read_pi_branch, read_pi_transcript

from conftest import make_pimem, run_cli
from pi_sessions import assistant, entry, session_file, tool_result, user


def linear(path: Path) -> Path:
    """TC-35: three user/assistant pairs at 09:01 to 09:06."""
    return session_file(
        path,
        [
            entry("5b692fc1", None, 0, "model_change", provider="fake", modelId="fake-model"),
            user("a1a1a1a1", "5b692fc1", 1, "first question"),
            assistant("b1b1b1b1", "a1a1a1a1", 2, "first answer"),
            user("a2a2a2a2", "b1b1b1b1", 3, "second question"),
            assistant("b2b2b2b2", "a2a2a2a2", 4, "second answer"),
            user("a3a3a3a3", "b2b2b2b2", 5, "third question"),
            assistant("b3b3b3b3", "a3a3a3a3", 6, "third answer"),
        ],
    )


def forked(path: Path) -> Path:
    """Back at b1, a second branch was started after the anchored one; it is the live one."""
    return session_file(
        path,
        [
            user("a1a1a1a1", None, 1, "first question"),
            assistant("b1b1b1b1", "a1a1a1a1", 2, "first answer"),
            user("c1c1c1c1", "b1b1b1b1", 3, "anchored question"),
            assistant("d1d1d1d1", "c1c1c1c1", 4, "anchored answer"),
            user("c2c2c2c2", "b1b1b1b1", 5, "live sibling question"),
            assistant("d2d2d2d2", "c2c2c2c2", 6, "live sibling answer"),
        ],
    )


def read(path: Path, turn: str | None = None, **options: int) -> Transcript:
    return read_pi_transcript(TranscriptRequest(path=path, turn=turn, **options))


def rendered(path: Path, turn: str | None = None, **options: int) -> str:
    return render_transcript(read(path, turn, **options))


# -- L3: TC-35 ------------------------------------------------------------------------------------


def test_without_a_turn_the_whole_linear_session_renders(tmp_path: Path) -> None:
    text = rendered(linear(tmp_path / "s.jsonl"))
    assert text == (
        "[User] 09:01\nfirst question\n\n"
        "[Assistant] 09:02\nfirst answer\n\n"
        "[User] 09:03\nsecond question\n\n"
        "[Assistant] 09:04\nsecond answer\n\n"
        "[User] 09:05\nthird question\n\n"
        "[Assistant] 09:06\nthird answer"
    )
    assert "(target)" not in text


def test_limit_keeps_the_last_turns(tmp_path: Path) -> None:
    text = rendered(linear(tmp_path / "s.jsonl"), limit=2)
    assert text == "[User] 09:05\nthird question\n\n[Assistant] 09:06\nthird answer"


def test_turn_with_no_context_is_exactly_the_target(tmp_path: Path) -> None:
    text = rendered(linear(tmp_path / "s.jsonl"), "a2a2a2a2", context=0)
    assert text == "[User] 09:03 (target)\nsecond question"


def test_context_shows_turns_on_each_side(tmp_path: Path) -> None:
    turns = read(linear(tmp_path / "s.jsonl"), "a2a2a2a2", context=1).turns
    assert [(t.body, t.target) for t in turns] == [
        ("first answer", False),
        ("second question", True),
        ("second answer", False),
    ]


def test_a_unique_prefix_finds_the_turn(tmp_path: Path) -> None:
    turns = read(linear(tmp_path / "s.jsonl"), "a2", context=0).turns
    assert [(t.body, t.target) for t in turns] == [("second question", True)]


def test_an_ambiguous_prefix_is_an_error(tmp_path: Path) -> None:
    path = linear(tmp_path / "s.jsonl")
    with pytest.raises(PimemError, match=r'3 entries .* "a".*ambiguous') as caught:
        read(path, "a")
    assert str(path) in str(caught.value)


def test_an_unknown_turn_is_an_error(tmp_path: Path) -> None:
    path = linear(tmp_path / "s.jsonl")
    with pytest.raises(PimemError, match=r'"ffff"') as caught:
        read(path, "ffff")
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("turn", ["", "   "])
def test_an_empty_turn_is_an_error(tmp_path: Path, turn: str) -> None:
    with pytest.raises(PimemError, match="non-empty"):
        read(linear(tmp_path / "s.jsonl"), turn)


def test_a_missing_file_is_not_on_this_machine(tmp_path: Path) -> None:
    path = tmp_path / "gone.jsonl"
    with pytest.raises(TranscriptNotHere, match="is not on this machine") as caught:
        read(path)
    assert str(path) in str(caught.value)


def test_a_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PimemError, match="could not read") as caught:
        read(tmp_path)
    assert str(tmp_path) in str(caught.value)


def test_a_session_with_nothing_to_show_is_an_error(tmp_path: Path) -> None:
    path = session_file(
        tmp_path / "s.jsonl",
        [entry("5b692fc1", None, 0, "model_change", provider="fake", modelId="fake-model")],
    )
    with pytest.raises(PimemError, match="no user or assistant turns") as caught:
        read(path)
    assert str(path) in str(caught.value)


def test_the_anchored_branch_is_shown_not_the_live_sibling(tmp_path: Path) -> None:
    text = rendered(forked(tmp_path / "s.jsonl"), "c1c1c1c1", context=5)
    assert "anchored answer" in text
    assert "live sibling" not in text
    assert "[User] 09:03 (target)\nanchored question" in text


def test_the_anchored_branch_runs_to_its_latest_leaf(tmp_path: Path) -> None:
    """Two continuations below the target: the later one (in file order) is shown."""
    path = session_file(
        tmp_path / "s.jsonl",
        [
            user("a1a1a1a1", None, 1, "question"),
            assistant("b1b1b1b1", "a1a1a1a1", 2, "older continuation"),
            assistant("b2b2b2b2", "a1a1a1a1", 3, "newer continuation"),
            user("c1c1c1c1", None, 4, "an unrelated live branch"),
        ],
    )
    text = rendered(path, "a1a1", context=5)
    assert text == "[User] 09:01 (target)\nquestion\n\n[Assistant] 09:03\nnewer continuation"


def test_without_a_turn_the_live_branch_is_shown(tmp_path: Path) -> None:
    text = rendered(forked(tmp_path / "s.jsonl"))
    assert "live sibling answer" in text
    assert "anchored" not in text


def test_a_target_that_is_not_a_turn_marks_the_turn_before_it(tmp_path: Path) -> None:
    path = session_file(
        tmp_path / "s.jsonl",
        [
            user("a1a1a1a1", None, 1, "read the file"),
            assistant("b1b1b1b1", "a1a1a1a1", 2, [{"type": "toolCall", "name": "read"}]),
            tool_result("t1t1t1t1", "b1b1b1b1", 3, "file contents"),
            assistant("b2b2b2b2", "t1t1t1t1", 4, "done"),
        ],
    )
    turns = read(path, "t1t1", context=0).turns
    assert [(t.body, t.target) for t in turns] == [("read()", True)]


def test_a_tool_call_renders_as_a_one_liner(tmp_path: Path) -> None:
    call = {
        "type": "toolCall",
        "id": "call_1",
        "name": "edit",
        "arguments": {"alpha": "y" * 80, "bravo": 2, "charlie": True, "delta": "dropped"},
    }
    path = session_file(
        tmp_path / "s.jsonl",
        [user("a1a1a1a1", None, 1, "edit it"), assistant("b1b1b1b1", "a1a1a1a1", 2, [call])],
    )
    body = read(path).turns[-1].body
    assert body == f"edit(alpha={'y' * 59}…, bravo=2, charlie=true, …)"


def test_tool_call_values_are_collapsed_to_one_line(tmp_path: Path) -> None:
    calls = [
        {"type": "text", "text": "  Let me look.  "},
        {"type": "toolCall", "name": "bash", "arguments": {"command": "ls\n  -la\tsrc"}},
        {"type": "toolCall", "name": "write", "arguments": {"opts": {"a": [1, 2]}, "n": None}},
        {"type": "toolCall", "name": "noop", "arguments": {}},
    ]
    path = session_file(
        tmp_path / "s.jsonl",
        [user("a1a1a1a1", None, 1, "go"), assistant("b1b1b1b1", "a1a1a1a1", 2, calls)],
    )
    assert read(path).turns[-1].body == (
        'Let me look.\nbash(command=ls -la src)\nwrite(opts={"a": [1, 2]}, n=null)\nnoop()'
    )


def test_a_long_turn_is_cut_and_marked(tmp_path: Path) -> None:
    path = session_file(tmp_path / "s.jsonl", [user("a1a1a1a1", None, 1, "x" * 3000)])
    body = read(path).turns[0].body
    first, marker = body.split("\n")
    assert first == "x" * 2000
    assert marker == "[... the rest of this turn was left out ...]"


def test_thinking_images_and_tool_results_are_dropped(tmp_path: Path) -> None:
    path = session_file(
        tmp_path / "s.jsonl",
        [
            user(
                "a1a1a1a1",
                None,
                1,
                [
                    {"type": "text", "text": "look at this"},
                    {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                    {"type": "text", "text": "   "},
                    {"type": "text", "text": "and this"},
                ],
            ),
            assistant(
                "b1b1b1b1",
                "a1a1a1a1",
                2,
                [
                    {"type": "thinking", "thinking": "SECRET PONDERING"},
                    {"type": "toolCall", "name": "read", "arguments": {"path": "a.png"}},
                ],
            ),
            tool_result("t1t1t1t1", "b1b1b1b1", 3, "TOOL OUTPUT"),
            assistant("b2b2b2b2", "t1t1t1t1", 4, [{"type": "thinking", "thinking": "hmm"}]),
            user("a2a2a2a2", "b2b2b2b2", 5, [{"type": "image", "data": "x"}]),
            assistant("b3b3b3b3", "a2a2a2a2", 6, "a cat"),
        ],
    )
    text = rendered(path)
    assert text == (
        "[User] 09:01\nlook at this\nand this\n\n"
        "[Assistant] 09:02\nread(path=a.png)\n\n"
        "[Assistant] 09:06\na cat"
    )


def test_bare_string_content_is_a_user_turn(tmp_path: Path) -> None:
    path = session_file(tmp_path / "s.jsonl", [user("a1a1a1a1", None, 1, "plain")])
    path.write_text(path.read_text().replace('[{"type": "text", "text": "plain"}]', '"plain"'))
    assert '"content": "plain"' in path.read_text()
    assert rendered(path) == "[User] 09:01\nplain"


def test_junk_and_non_entry_lines_are_skipped(tmp_path: Path) -> None:
    path = session_file(
        tmp_path / "s.jsonl",
        [
            "not json at all",
            "",
            "[1, 2, 3]",
            '{"type": "message", "parentId": null}',
            user("a1a1a1a1", None, 1, "first question"),
            '{"type":"message","id":"b0b0b0b0","parentId":"a1a1a1a1","message":{"role":',
            assistant("b1b1b1b1", "a1a1a1a1", 2, "first answer"),
        ],
    )
    assert rendered(path) == "[User] 09:01\nfirst question\n\n[Assistant] 09:02\nfirst answer"


def test_times_fall_back_to_the_message_then_to_dashes(tmp_path: Path) -> None:
    first = user("a1a1a1a1", None, 1, "iso broken, ms fine")
    first["timestamp"] = "yesterday-ish"
    second = assistant("b1b1b1b1", "a1a1a1a1", 2, "no time at all")
    del second["timestamp"]
    message = second["message"]
    assert isinstance(message, dict)
    message["timestamp"] = "soon"
    path = session_file(tmp_path / "s.jsonl", [first, second])
    assert [t.time for t in read(path).turns] == ["09:01", "--:--"]


def test_a_file_without_a_header_still_renders(tmp_path: Path) -> None:
    path = session_file(tmp_path / "s.jsonl", [user("a1a1a1a1", None, 1, "hi")], header=False)
    assert rendered(path) == "[User] 09:01\nhi"


def test_json_output_carries_every_turn(tmp_path: Path) -> None:
    path = linear(tmp_path / "s.jsonl")
    data = transcript_to_json(read(path, "b3", context=1))
    assert data == {
        "path": str(path),
        "turns": [
            {"role": "user", "time": "09:05", "body": "third question", "target": False},
            {"role": "assistant", "time": "09:06", "body": "third answer", "target": True},
        ],
        "on_this_machine": True,
    }


# -- through the facade, the CLI, and without a backend ---------------------------------------


def test_the_facade_answers_with_the_pi_reader(pimem: Pimem, tmp_path: Path) -> None:
    assert pimem.pm.answering_plugins()["pimem_open_transcript"] == "pi-transcript"
    transcript = pimem.read_transcript(
        TranscriptRequest(path=linear(tmp_path / "s.jsonl"), turn="a1", context=0)
    )
    assert render_transcript(transcript) == "[User] 09:01 (target)\nfirst question"


def test_cli_prints_the_window(tmp_path: Path) -> None:
    path = linear(tmp_path / "s.jsonl")
    result = run_cli("transcript", str(path), "--turn", "a2a2", "--context", "0")
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout == "[User] 09:03 (target)\nsecond question\n"


def test_cli_json(tmp_path: Path) -> None:
    path = linear(tmp_path / "s.jsonl")
    result = run_cli("transcript", str(path), "--limit", "1", "--json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "path": str(path),
        "turns": [{"role": "assistant", "time": "09:06", "body": "third answer", "target": False}],
        "on_this_machine": True,
    }


def test_a_transcript_recorded_on_another_machine_is_an_answer_not_an_error(
    tmp_path: Path,
) -> None:
    """A store shared through git anchors entries to a teammate's transcripts: reading one
    here says the entry is all there is, and exits 0."""
    path = tmp_path / "teammate" / "s.jsonl"
    text = run_cli("transcript", str(path), "--turn", "a1")
    assert (text.code, text.stderr) == (0, "")
    assert text.stdout == (
        f"The transcript {path} is not on this machine: the session was recorded on another "
        "one (its entries came with the memory store), or the file moved since. The entry that "
        "names it is all that was kept of that session.\n"
    )
    data = run_cli("transcript", str(path), "--json")
    assert data.code == 0
    assert json.loads(data.stdout) == {"path": str(path), "turns": [], "on_this_machine": False}


def test_cli_reports_errors_in_one_line(tmp_path: Path) -> None:
    path = linear(tmp_path / "s.jsonl")
    result = run_cli("transcript", str(path), "--turn", "a")
    assert result.code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("pimem: error: 3 entries")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(("option", "value"), [("--context", "-1"), ("--limit", "0")])
def test_cli_rejects_bad_numbers(tmp_path: Path, option: str, value: str) -> None:
    result = run_cli("transcript", str(linear(tmp_path / "s.jsonl")), option, value)
    assert result.code == 2
    assert option in result.stderr


def test_l3_needs_no_backend(tmp_path: Path) -> None:
    """Reading a transcript never imports memsearch, even with the backend plugin blocked."""
    path = linear(tmp_path / "s.jsonl")
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from pimem_core import Pimem\n"
        "from pimem_core.render import render_transcript\n"
        "from pimem_core.service_values import TranscriptRequest\n"
        "pimem = Pimem.from_env()\n"
        f"request = TranscriptRequest(path=Path({str(path)!r}), turn='b3', context=0)\n"
        "print(render_transcript(pimem.read_transcript(request)))\n"
        "assert not any(m.split('.')[0] == 'memsearch' for m in sys.modules), 'memsearch imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PIMEM_DISABLE_PLUGINS": "memsearch-index"},
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[Assistant] 09:06 (target)\nthird answer\n"


# -- the branch capture reads ------------------------------------------------------------------------


def test_branch_entries_root_first(tmp_path: Path) -> None:
    path = session_file(
        tmp_path / "s.jsonl",
        [
            entry("5b692fc1", None, 0, "model_change", provider="fake", modelId="fake-model"),
            user("a1a1a1a1", "5b692fc1", 1, "hello memory"),
            entry(
                "f795335c",
                "a1a1a1a1",
                1,
                "custom_message",
                customType="memory-context",
                content="INJECTED CONTEXT",
                display=False,
            ),
            assistant(
                "b1b1b1b1",
                "f795335c",
                2,
                [
                    {"type": "thinking", "thinking": "hmm"},
                    {"type": "text", "text": "Looking."},
                    {"type": "toolCall", "name": "memory_probe", "arguments": {"query": "x"}},
                    {"type": "text", "text": "  "},
                ],
                stop_reason="toolUse",
            ),
            tool_result("t1t1t1t1", "b1b1b1b1", 3, "memories: none"),
            assistant("b2b2b2b2", "t1t1t1t1", 4, [{"type": "text", "text": "Done."}]),
            entry("c0c0c0c0", "b2b2b2b2", 4, "custom", customType="state", data={}),
        ],
    )
    assert read_pi_branch(path) == (
        BranchEntry(id="5b692fc1", kind="other", time="09:00"),
        BranchEntry(id="a1a1a1a1", kind="message", role="user", text="hello memory", time="09:01"),
        BranchEntry(id="f795335c", kind="custom_message", text="INJECTED CONTEXT", time="09:01"),
        BranchEntry(
            id="b1b1b1b1",
            kind="message",
            role="assistant",
            text="Looking.",
            tool_calls=("memory_probe(query=x)",),
            time="09:02",
        ),
        BranchEntry(
            id="t1t1t1t1", kind="message", role="tool", text="memories: none", time="09:03"
        ),
        BranchEntry(id="b2b2b2b2", kind="message", role="assistant", text="Done.", time="09:04"),
        BranchEntry(id="c0c0c0c0", kind="other", time="09:04"),
    )


def test_branch_joins_text_blocks_with_blank_lines(tmp_path: Path) -> None:
    path = session_file(
        tmp_path / "s.jsonl",
        [
            user(
                "a1a1a1a1",
                None,
                1,
                [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
            ),
            assistant(
                "b1b1b1b1",
                "a1a1a1a1",
                2,
                [{"type": "text", "text": "three"}, {"type": "text", "text": "four"}],
            ),
        ],
    )
    branch = read_pi_branch(path)
    assert branch is not None
    assert [e.text for e in branch] == ["one\n\ntwo", "three\n\nfour"]


def test_branch_marks_an_aborted_run(tmp_path: Path) -> None:
    path = session_file(
        tmp_path / "s.jsonl",
        [
            user("a1a1a1a1", None, 1, "do it"),
            assistant("b1b1b1b1", "a1a1a1a1", 2, "half", stop_reason="aborted"),
        ],
    )
    branch = read_pi_branch(path)
    assert branch is not None
    assert [e.aborted for e in branch] == [False, True]


def test_branch_after_a_fork_leaves_the_abandoned_sibling_out(tmp_path: Path) -> None:
    path = session_file(
        tmp_path / "s.jsonl",
        [
            user("a1a1a1a1", None, 1, "first question"),
            assistant("b1b1b1b1", "a1a1a1a1", 2, "first answer"),
            user("c1c1c1c1", "b1b1b1b1", 3, "abandoned question"),
            assistant("d1d1d1d1", "c1c1c1c1", 4, "abandoned answer"),
            user("c2c2c2c2", "b1b1b1b1", 5, "live question"),
            assistant("d2d2d2d2", "c2c2c2c2", 6, "live answer"),
        ],
    )
    branch = read_pi_branch(path)
    assert branch is not None
    assert [e.id for e in branch] == ["a1a1a1a1", "b1b1b1b1", "c2c2c2c2", "d2d2d2d2"]


def test_branch_ending_at_a_given_leaf(tmp_path: Path) -> None:
    path = forked(tmp_path / "s.jsonl")
    branch = read_pi_branch(path, "d1d1d1d1")
    assert branch is not None
    assert [e.id for e in branch] == ["a1a1a1a1", "b1b1b1b1", "c1c1c1c1", "d1d1d1d1"]
    live = read_pi_branch(path, "not-written-yet")
    assert live is not None
    assert [e.id for e in live][-1] == "d2d2d2d2"


def test_branch_of_a_file_that_is_not_a_pi_session_is_not_answered(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"role": "user", "text": "hi"}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    no_header = session_file(tmp_path / "s.jsonl", [user("a1a1a1a1", None, 1, "hi")], header=False)
    assert read_pi_branch(chat) is None
    assert read_pi_branch(empty) is None
    assert read_pi_branch(no_header) is None


def test_branch_of_a_missing_or_unreadable_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TranscriptNotHere, match="is not on this machine"):
        read_pi_branch(tmp_path / "gone.jsonl")
    with pytest.raises(PimemError, match="could not read"):
        read_pi_branch(tmp_path)


def test_the_facade_reads_the_branch(tmp_path: Path) -> None:
    path = forked(tmp_path / "s.jsonl")
    branch = make_pimem().read_branch(path)
    assert [e.text for e in branch] == [
        "first question",
        "first answer",
        "live sibling question",
        "live sibling answer",
    ]


def test_a_line_nested_too_deep_to_parse_is_junk_like_any_other(tmp_path: Path) -> None:
    # Found by the reliability suite: the JSON parser raises RecursionError on such a line.
    path = session_file(
        tmp_path / "s.jsonl",
        [user("a1", None, 1, "question"), "[" * 100_000, assistant("b1", "a1", 2, "answer")],
    )
    assert [entry.id for entry in read_pi_branch(path) or ()] == ["a1", "b1"]
    assert [turn.body for turn in read(path).turns] == ["question", "answer"]


def test_a_timestamp_out_of_range_once_made_local_has_no_time(tmp_path: Path) -> None:
    # Found by the reliability suite: astimezone() raises OverflowError at the edge of year 1.
    line = {**user("a1", None, 1, "question"), "timestamp": "0001-01-01T00:00:00+14:00"}
    line["message"] = {"role": "user", "content": "question"}
    path = session_file(tmp_path / "s.jsonl", [line])
    assert [turn.time for turn in read(path).turns] == ["--:--"]
