"""Makes the home in this folder with the release before logs/agent.db (commit f8299fc), for
tests/store/test_upgrade.py: run it with that release first on the path, from its checkout:

    PYTHONPATH=/path/to/that/checkout python tests/store/older_home/make.py /tmp/older
    (then copy /tmp/older/{config.yaml,rules.md,scratchpad,logs,workspace} here)

Real cycles of that release (a scripted model) write every file it kept: the cycle index, its
running totals and the newest id given, the journal of calls (one cut by a kill: an intent with no
result), the archive and its recall index, a parked and an approved call, the inbox, the endpoint's
and the sandbox's probes, a transcript and a log per cycle, the snapshot pairs, and a cycle killed
after its before snapshot (no record). Then a torn record is left at the end of the archive, as a
crash mid-append leaves one.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import yaml
from agent.store.inbox import queue_edit
from agent.store.recall_index import search

from agent.cli import main
from agent.common.cycle_ids import new_cycle_id
from agent.common.files import append_jsonl
from agent.cycle.journal import journal_file
from agent.models.openai.format_ladder import EndpointMemory
from agent.store.home import Home

root = Path(sys.argv[1])
home = Home.at(root)


def run(*args: str) -> int:
    try:
        main(list(args), standalone_mode=False)
    except SystemExit as end:
        return int(end.code or 0)
    return 0


def script(replies: list[dict]) -> str:
    path = root.parent / f"script-{len(list(root.parent.glob('script-*')))}.yaml"
    path.write_text(yaml.safe_dump([json.dumps(r) for r in replies]))
    return f"scripted:{path}"


def done(summary: str) -> dict:
    return {"tool": "done", "args": {"summary": summary}}


assert run("init", str(root)) == 0
(root / "config.yaml").write_text(
    "notes_budget: 300\ncompleted_window: 1\napproval_required: [shell]\nworkspace: workspace\n"
    "prices: {'scripted:x': {input: 1.0, output: 2.0}}\n"
)
tasks = ["look at the disk", "rotate the logs", "write the report", "tidy up"]
(root / "scratchpad" / "active.yaml").write_text(
    yaml.safe_dump({"goals": ["keep the host healthy"], "current_task": tasks[0], "pending_actions": tasks[1:]})
)
note = {"tool": "echo", "args": {"message": "observed: the disk holds 12G free of 50G, " + "lorem ipsum " * 20}}
write = {"tool": "write_file", "args": {"path": "report.txt", "content": "all well"}}
assert run("run", "--home", str(root), "--model", script([note, done("disk looked at")]), "-q") == 0
assert run("run", "--home", str(root), "--model", script([note, write, done("logs rotated")]), "-q") == 0
assert run("run", "--home", str(root), "--model", script([note, done("report written")]), "-q") == 0
assert run("run", "--home", str(root), "--model", script([{"tool": "shell", "args": {"command": "ls"}}]), "-q") == 8
assert run("run", "--home", str(root), "--model", script([{"tool": "shell", "args": {"command": "df -h"}}]), "-q") == 8
assert run("approve", "--home", str(root), "1") == 0
queue_edit(home, {"op": "task_add", "text": "queued while a cycle ran", "first": False})
EndpointMemory(home.endpoint_memory, "http://127.0.0.1:8080/v1", "qwen").remember("json_object_schema", print)
append_jsonl(
    journal_file(home),
    [
        {
            "call": "20200101_000000_01/1",
            "event": "intent",
            "cycle_id": "x",
            "tool": "write_file",
            "args": {"path": "cut.txt", "content": "?"},
            "at": "2020-01-01T00:00:00+00:00",
        }
    ],
)  # a call a kill cut: the next cycle must note it
killed = new_cycle_id(home, dt.datetime.now(dt.timezone.utc))
home.snapshot(killed, "before").write_text((root / "scratchpad" / "active.yaml").read_text())
search(home, "disk", 3)  # builds logs/recall.sqlite3
with open(home.archive, "ab") as archive:
    archive.write(b'{"cycle_id": "torn", "kind": "note", "val')
print(killed)
