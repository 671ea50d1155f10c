"""Commands the tools start never outlive the agent (agent/tools/children.py): the kernel's
parent-death signal, and the records of running process groups that the next cycle reaps. Real
processes throughout; a recorded group is only killed while it is still the one recorded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent.tools.children import RECORDS, forget_group, reap_recorded, record_group
from tests.helpers import wait_for


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def group():
    """A command leading its own session and group, as the shell tool starts one, with a child."""
    leader = subprocess.Popen(["sh", "-c", "sleep 300 & wait"], start_new_session=True)
    yield leader
    try:
        os.killpg(leader.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    leader.wait(timeout=30)


def _members(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[2] == str(pgid) and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def test_a_recorded_group_left_by_a_killed_agent_is_killed_whole(tmp_path: Path, group):
    wait_for(lambda: len(_members(group.pid)) == 2, "the command and its background child")
    record_group(tmp_path, group.pid)
    record = json.loads((tmp_path / RECORDS / f"{group.pid}.json").read_text())
    assert record["pgid"] == group.pid and record["start_time"].isdigit()
    assert reap_recorded(tmp_path) == [group.pid]
    assert group.wait(timeout=30) == -signal.SIGKILL
    wait_for(lambda: not _members(group.pid), "every process of the group to be gone")
    assert list((tmp_path / RECORDS).iterdir()) == []


def test_a_group_whose_leader_is_gone_is_still_reaped_while_its_members_live(tmp_path: Path):
    leader = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!"], start_new_session=True, stdout=subprocess.PIPE)
    orphan = int(leader.stdout.readline())
    record_group(tmp_path, leader.pid)
    assert leader.wait(timeout=30) == 0  # the leader ended; its background child lives on in the group
    try:
        assert _alive(orphan)
        assert reap_recorded(tmp_path) == [leader.pid]
        wait_for(lambda: not _alive(orphan), "the orphan to be killed")
    finally:
        if _alive(orphan):
            os.kill(orphan, signal.SIGKILL)
        leader.stdout.close()


def test_a_record_whose_number_was_reused_kills_nothing(tmp_path: Path, group):
    folder = tmp_path / RECORDS
    folder.mkdir(parents=True)
    (folder / f"{group.pid}.json").write_text(json.dumps({"pgid": group.pid, "start_time": "1"}))
    assert reap_recorded(tmp_path) == []
    assert _alive(group.pid) and not (folder / f"{group.pid}.json").exists()


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", '{"pgid": "x", "start_time": null}', '{"pgid": 1, "start_time": null}', '{"pgid": 0}', "{}"],
)
def test_hand_broken_records_and_pid_1_are_never_killed_and_are_removed(tmp_path: Path, text: str):
    folder = tmp_path / RECORDS
    folder.mkdir(parents=True)
    (folder / "1.json").write_text(text)
    assert reap_recorded(tmp_path) == [] and list(folder.iterdir()) == []


def test_a_fifo_or_a_link_in_place_of_a_record_is_removed_unread(tmp_path: Path, group):
    folder = tmp_path / RECORDS
    folder.mkdir(parents=True)
    os.mkfifo(folder / "7.json")  # opened blocking, it would hold the cycle (and the lock) forever
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"pgid": group.pid, "start_time": None}))
    (folder / "8.json").symlink_to(elsewhere)
    assert reap_recorded(tmp_path) == [] and list(folder.iterdir()) == [] and _alive(group.pid)


def test_an_mcp_servers_record_is_left_alone_while_the_agent_that_owns_it_runs(tmp_path: Path, group):
    folder = tmp_path / RECORDS
    folder.mkdir(parents=True)
    owner = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        start = Path(f"/proc/{owner.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        record = {"pgid": group.pid, "start_time": None, "owner": owner.pid, "owner_start": start}
        (folder / "mcp-1-0.json").write_text(json.dumps(record))
        assert reap_recorded(tmp_path) == [] and (folder / "mcp-1-0.json").exists()  # its owner is alive
    finally:
        owner.communicate(b"")
    assert (folder / "mcp-1-0.json").exists()
    reap_recorded(tmp_path)
    assert not (folder / "mcp-1-0.json").exists()  # its owner gone: swept (the group is another's: not killed)
    assert _alive(group.pid)


def test_forget_group_drops_the_record_and_a_read_only_place_is_no_error(tmp_path: Path):
    record_group(tmp_path, os.getpid())
    forget_group(tmp_path, os.getpid())
    forget_group(tmp_path, os.getpid())  # twice: nothing to drop
    assert list((tmp_path / RECORDS).iterdir()) == [] and reap_recorded(tmp_path / "no-home") == []
    (tmp_path / "file").write_text("")
    record_group(tmp_path / "file", os.getpid())  # cannot make logs/ under a file: silently nothing


def test_a_child_dies_with_its_parent_even_when_the_parent_is_sigkilled(tmp_path: Path):
    """The parent (a real python process) starts a child with die_with_parent, then is killed -9."""
    code = (
        "import subprocess, sys\n"
        "from agent.tools.children import die_with_parent\n"
        "import os\n"
        "child = subprocess.Popen(['sleep', '300'], preexec_fn=die_with_parent(os.getpid()))\n"
        "print(child.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    parent = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    child = int(parent.stdout.readline())
    try:
        assert _alive(child)
        parent.kill()
        parent.wait(timeout=30)
        wait_for(lambda: not _alive(child), "the child to die with its parent")
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
        parent.stdout.close()
        parent.stdin.close()
