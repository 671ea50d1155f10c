"""`agent show --all` streams the archive: the same text and the same JSON as reading it whole."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.cli.archive_view import json_list, json_pieces
from agent.cli.common import print_json
from agent.store.archive import append_archive, archived
from agent.store.home import Home
from tests.helpers import run_cli

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(
    head=st.dictionaries(st.text(max_size=6), VALUES, min_size=1, max_size=4),
    lists=st.dictionaries(st.text(max_size=6).map(lambda k: "list " + k), st.lists(VALUES, max_size=4), max_size=2),
)
def test_the_json_written_piece_by_piece_is_the_json_written_whole(head, lists):
    whole = json.dumps({**head, **lists}, indent=2, ensure_ascii=False, default=str)
    assert "\n".join(json_pieces(head, {k: (lambda v=v: iter(v)) for k, v in lists.items()})) == whole


@settings(max_examples=100, deadline=None)
@given(items=st.lists(VALUES, max_size=5))
def test_a_json_list_written_item_by_item_is_the_json_written_whole(items):
    assert "\n".join(json_list(iter(items))) == json.dumps(items, indent=2, ensure_ascii=False, default=str)


def test_show_all_prints_what_reading_the_whole_archive_printed(worked_home, capsys):
    home = Home.at(worked_home)
    append_archive(
        home,
        [
            {
                "cycle_id": f"2020010{i}_000000",
                "kind": "completed_task",
                "value": {"task": f"t{i}", "summary": "s\u2028\x1b[31m"},
            }
            for i in range(3)
        ]
        + [
            {"cycle_id": "20200101_000000", "kind": "note", "value": "line one\nline two \x07"},
            {"cycle_id": "20200101_000000", "kind": "replaced_state", "value": {"goals": []}},
        ],
    )
    data = json.loads(run_cli("show", "--all", "--json", "--home", str(worked_home)).stdout)
    records = list(archived(home))
    tasks = [r for r in records if r["kind"] == "completed_task"]
    notes = [r for r in records if r["kind"] == "note"]
    assert data["archived_completed_tasks"] == tasks and data["archived_notes"] == notes
    print_json(data)  # the old way: the whole document at once
    assert run_cli("show", "--all", "--json", "--home", str(worked_home)).stdout == capsys.readouterr().out
    text = run_cli("show", "--all", "--home", str(worked_home)).stdout
    assert "archived completed (3):\n  - t0: s" in text and "\x1b" not in text and "\x07" not in text
    assert "archived notes (1 entry):\n  line one\n  line two" in text
