"""Reading JSON-lines files backwards and forwards in bounded memory finds exactly the records the
whole-file reader (`read_jsonl`) finds: torn lines, glued records, foreign lines and all."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.store.files import append_jsonl, read_jsonl
from agent.store.tail import lines_forwards, records_backwards, records_forwards

RECORD = st.fixed_dictionaries({"cycle_id": st.text(max_size=12)}, optional={"note": st.text(max_size=30)})
LINE = st.one_of(
    RECORD.map(lambda r: json.dumps(r, ensure_ascii=False)),
    RECORD.map(lambda r: json.dumps(r, ensure_ascii=False)[:7]),  # torn
    RECORD.map(lambda r: '{"cycle_id": "tor' + json.dumps(r, ensure_ascii=False)),  # glued
    st.sampled_from(["", "not json", "[1, 2]", '{"other": 1}', '{"cycle_id": "a\u2028b"}']),
)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(LINE, max_size=30), trailing_newline=st.booleans(), block=st.integers(1, 64))
def test_both_directions_find_what_the_whole_file_reader_finds(tmp_path_factory, lines, trailing_newline, block):
    path = tmp_path_factory.mktemp("tail") / "index.jsonl"
    path.write_text("\n".join(lines) + ("\n" if trailing_newline and lines else ""), encoding="utf-8")
    whole = read_jsonl(path, "cycle_id")
    assert list(records_backwards(path, "cycle_id", block=block)) == whole[::-1]
    assert list(records_forwards(path, "cycle_id")) == whole


def test_a_torn_last_line_is_skipped_and_the_record_after_it_is_found(tmp_path: Path):
    path = tmp_path / "index.jsonl"
    append_jsonl(path, [{"cycle_id": "a"}, {"cycle_id": "b"}])
    with open(path, "ab") as handle:
        handle.write(b'{"cycle_id": "c", "us')  # a crash mid-append
    assert [r["cycle_id"] for r in records_backwards(path, "cycle_id")] == ["b", "a"]
    assert [end for _, end in lines_forwards(path)] == [18, 36]  # the torn line has no newline yet: not given
    append_jsonl(path, [{"cycle_id": "d"}])
    assert [r["cycle_id"] for r in records_backwards(path, "cycle_id")] == ["d", "b", "a"]
    assert [r["cycle_id"] for r in records_forwards(path, "cycle_id")] == ["a", "b", "d"]


def test_reading_backwards_reads_only_as_far_as_asked(tmp_path: Path, monkeypatch):
    path = tmp_path / "index.jsonl"
    append_jsonl(path, [{"cycle_id": f"{i:06d}", "pad": "x" * 100} for i in range(20_000)])
    reads = []
    real_open = open

    def counting_open(*args, **kwargs):
        handle = real_open(*args, **kwargs)
        real_read = handle.read
        handle.read = lambda n=-1: reads.append(n) or real_read(n)  # type: ignore[method-assign]
        return handle

    monkeypatch.setattr("builtins.open", counting_open)
    newest = records_backwards(path, "cycle_id")
    assert [next(newest)["cycle_id"] for _ in range(3)] == ["019999", "019998", "019997"]
    assert len(reads) == 1 and 0 < reads[0] <= 64 * 1024  # one block from the end, not 2.5 MB


def test_a_missing_file_has_no_records(tmp_path: Path):
    assert list(records_backwards(tmp_path / "none.jsonl", "cycle_id")) == []
    assert list(records_forwards(tmp_path / "none.jsonl", "cycle_id")) == []
