"""`agent report`: the page's content, its escaping, its bad input. (What a browser makes of it:
tests/system/test_report_page.py.)"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import re
import stat
from collections import Counter
from html import unescape
from pathlib import Path

import pytest
import yaml

from agent.cli.window import spending_by_day, window_records, window_start
from agent.common.times import span_text
from agent.store.home import Home
from tests.helpers import run_cli
from tests.histories import HOSTILE_ERROR, HOSTILE_TASK, PATTERN, fabricated, write_history

EVERY = _dt.timedelta(hours=2)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)


@pytest.fixture
def history_home(tmp_path: Path) -> Path:
    """60 days of cycles two hours apart (720), the newest an hour ago, with an incident; the task now
    is the hostile one."""
    root = tmp_path / "home"
    (root / "scratchpad").mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump({"daily_cost_budget": 1.0, "prices": {}}))
    (root / "scratchpad" / "active.yaml").write_text(yaml.safe_dump({"current_task": HOSTILE_TASK}))
    write_history(Home.at(root), fabricated(720, _now() - _dt.timedelta(hours=1), EVERY, incident_at=30))
    return root


def _report(*args: str) -> tuple[int, str]:
    result = run_cli("report", *map(str, args))
    return result.exit_code, result.output


def _attributes(html: str, name: str, value: str) -> dict[str, str]:
    """{data-<name>: data-<value>} of every element that has both."""
    pairs = re.findall(rf'data-{name}="([^"]*)" data-{value}="([^"]*)"', html)
    return dict(pairs)


def test_a_report_is_one_private_file_and_a_line_saying_where(history_home, tmp_path):
    page = tmp_path / "out" / "r.html"
    page.parent.mkdir()
    code, output = _report("--home", history_home, "-o", page)
    assert code == 0 and output == f"wrote {page} (1 home(s), the last 30 day(s))\n"
    assert stat.S_IMODE(page.stat().st_mode) == 0o600  # it holds transcripts
    html = page.read_text()
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    markup = re.sub(r"<(script|style)[^>]*>.*?</\1>", "", html, flags=re.S)
    assert re.findall(r'(?:src|href|action)="([^"]*)"', markup) == ["#home-0"] * markup.count('href="#home-0"')
    assert "://" not in markup and "<link" not in markup  # nothing fetched: all of it is inside


def test_the_counts_per_stop_reason_are_the_windows_only(history_home, tmp_path):
    page = tmp_path / "r.html"
    assert _report("--home", history_home, "-o", page, "--days", "10")[0] == 0
    history = json.loads(run_cli("history", "--home", str(history_home), "--json", "--limit", "0").output)
    since = window_start(10, _now()).strftime("%Y%m%d")
    expected = Counter(r["stop_reason"] for r in history if r["cycle_id"][:8] >= since)
    shown = {reason: int(count) for reason, count in _attributes(page.read_text(), "stop-reason", "count").items()}
    assert shown == dict(expected)
    assert sum(shown.values()) < len(history) / 5  # the other 50 days are left out


def test_the_days_are_history_dailys(history_home, tmp_path):
    page = tmp_path / "r.html"
    assert _report("--home", history_home, "-o", page, "--days", "7")[0] == 0
    daily = json.loads(run_cli("history", "--home", str(history_home), "--daily", "--json", "--limit", "7").output)
    rows = re.findall(
        r'data-day="([^"]+)" data-cycles="(\d+)" data-tokens="(\d+)" data-cost="([^"]+)"', page.read_text()
    )
    # from the page's first day: just past midnight UTC the page's 7 days end on one with no cycles
    # yet, so history's 7 newest days reach one further back
    assert rows and [(d, int(c), int(t), float(x)) for d, c, t, x in rows] == [
        (d["day"], d["cycles"], d["tokens"], d["cost"]) for d in daily if d["day"] >= min(r[0] for r in rows)
    ]


def test_model_text_is_escaped_everywhere_and_no_script_can_be_closed(history_home, tmp_path):
    page = tmp_path / "r.html"  # a whole round of the pattern in detail: the hostile error's cycle among them
    assert _report("--home", history_home, "-o", page, "--detail", len(PATTERN))[0] == 0
    html = page.read_text()
    assert "<img" not in html and "<script>window" not in html and "<b>bold?" not in html
    assert "&lt;img src=x onerror=" in html  # the task, as text
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned=2" in html  # the error, as text
    assert "\u2028" not in html and "\u2029" not in html
    for block in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', html, re.S):
        assert "<" not in block and ">" not in block  # nothing in the data can end its block
        json.loads(block)
    (data,) = [json.loads(b) for b in re.findall(r'class="home-data"[^>]*>(.*?)</script>', html, re.S)]
    assert HOSTILE_TASK in data["timeline"]["tasks"]  # the same text, for the page's script to show as text
    assert HOSTILE_ERROR.split("\u2028")[0] not in html


def test_only_the_packages_own_scripts_and_styles_may_run(history_home, tmp_path):
    page = tmp_path / "r.html"
    assert _report("--home", history_home, "-o", page)[0] == 0
    html = page.read_text()
    policy = unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1))
    rules = dict(rule.strip().split(" ", 1) for rule in policy.split(";"))
    assert rules["default-src"] == "'none'"
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    styles = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert len(scripts) == 2 and len(styles) == 3

    def digest(text: str) -> str:
        return f"'sha256-{base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()}'"

    assert sorted(rules["script-src"].split()) == sorted(map(digest, scripts))
    assert sorted(rules["style-src"].split()) == sorted(map(digest, styles))
    assert " style=" not in html and " on" not in re.sub(r"<script>.*?</script>", "", html, flags=re.S).lower().replace(
        " one", ""
    ).replace(" on ", "")


def test_several_homes_get_an_index_with_the_ones_that_need_a_person_first(history_home, tmp_path):
    quiet = tmp_path / "quiet"
    (quiet / "scratchpad").mkdir(parents=True)
    write_history(Home.at(quiet), fabricated(20, _now() - _dt.timedelta(minutes=30), EVERY, pattern=["done"]))
    folder = tmp_path / "not-a-home"
    folder.mkdir()
    page = tmp_path / "r.html"
    code, output = _report(quiet, history_home, folder, "-o", page)
    assert code == 0 and "3 home(s)" in output
    html = page.read_text()
    rows = re.findall(
        r'<tr class="home-row[^"]*" data-home="([^"]+)" data-state="([^"]+)" data-needs-person="(\w+)"', html
    )
    needs = [needs_person for _, _, needs_person in rows]
    assert needs == sorted(needs, key=lambda n: n != "true")  # every home that needs a person comes first
    assert (str(quiet), "ok", "false") in rows and (str(folder), "not a home", "true") in rows
    assert html.count('<section class="home"') == 3


def test_json_says_where_the_page_went_and_how_each_home_is(history_home, tmp_path):
    page = tmp_path / "r.html"
    result = run_cli("report", "--home", str(history_home), "-o", str(page), "--json")
    data = json.loads(result.output)
    assert data["output"] == str(page) and data["bytes"] == page.stat().st_size
    assert [h["home"] for h in data["homes"]] == [str(history_home)] and "status" not in data["homes"][0]


def test_a_folder_that_is_not_a_home_is_refused_and_nothing_is_written(tmp_path):
    page = tmp_path / "r.html"
    code, output = _report("--home", tmp_path, "-o", page)
    assert code == 2 and "is not an agent home" in output and output.count("\n") == 1
    assert not page.exists()


def test_an_output_that_cannot_be_written_is_one_line_and_exit_7(history_home, tmp_path):
    page = tmp_path / "missing" / "r.html"
    code, output = _report("--home", history_home, "-o", page)
    assert code == 7 and output.startswith("agent: error: could not write") and output.count("\n") == 1
    assert not page.parent.exists()


def test_an_existing_page_is_replaced_whole(history_home, tmp_path):
    page = tmp_path / "r.html"
    page.write_text("old")
    assert _report("--home", history_home, "-o", page)[0] == 0
    assert page.read_text().startswith("<!doctype html>")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.parametrize("days", ["0", "-3", "many"])
def test_a_bad_days_is_a_usage_error(history_home, tmp_path, days):
    code, output = _report("--home", history_home, "-o", tmp_path / "r.html", "--days", days)
    assert code == 2 and "--days" in output and not (tmp_path / "r.html").exists()


def test_the_window_is_read_from_the_newest_cycle_back_to_its_first_day(history_home):
    home = Home.at(history_home)
    since = window_start(3, _now())
    records = window_records(home, False, since)
    assert records and all(r["cycle_id"][:8] >= since.strftime("%Y%m%d") for r in records)
    assert len(records) in range(24, 37)  # two or three days and the part of today, 12 a day


def _steps_to_read_the_window(root: Path, since: _dt.datetime) -> tuple[int, int]:
    """(cycles in the window, the SQLite virtual machine's steps to read them and their days' spending)."""
    from agent.store.db import records

    home = Home.at(root)
    connection = records(home).connection
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0  # go on

    connection.set_progress_handler(count, 50)
    try:
        found = window_records(home, False, since)
        spending_by_day(home, since, _now(), {})
    finally:
        connection.set_progress_handler(None, 0)
    return len(found), steps[0]


def test_the_window_costs_the_same_however_long_the_history_before_it(tmp_path):
    end, since = _now() - _dt.timedelta(hours=1), window_start(7, _now())
    roots = {}
    for before in (100, 20_000):  # cycles before the window, then the same 7 days of cycles two hours apart
        roots[before] = tmp_path / str(before)
        (roots[before] / "scratchpad").mkdir(parents=True)
        write_history(Home.at(roots[before]), fabricated(before + 84, end, EVERY, incident_at=None))
    (short, short_steps), (long, long_steps) = (_steps_to_read_the_window(roots[n], since) for n in (100, 20_000))
    assert short == long and short in range(72, 85)
    assert long_steps <= short_steps * 1.2 + 50, (short_steps, long_steps)  # a scan of 20,000 rows is 200x more


def test_a_secret_known_now_is_redacted_from_every_part_of_the_page(tmp_path, monkeypatch):
    secret = "tok-7f3a9c2e81b44d0e9a6f"
    root = tmp_path / "home"
    (root / "scratchpad").mkdir(parents=True)
    (root / "config.yaml").write_text("secret_env: [REPORT_TEST_TOKEN]\n")
    (root / "scratchpad" / "active.yaml").write_text(yaml.safe_dump({"current_task": f"use {secret} once"}))
    script = tmp_path / "script.yaml"
    replies = [
        {"tool": "echo", "args": {"message": f"the token is {secret}"}},
        {"tool": "done", "args": {"summary": secret}},
    ]
    script.write_text(yaml.safe_dump([json.dumps(r) for r in replies]))
    assert (
        run_cli("run", "--home", str(root), "--model", f"scripted:{script}").exit_code == 0
    )  # the secret unknown then
    assert secret in run_cli("logs", "--home", str(root), "--transcript").output  # kept as it was then
    monkeypatch.setenv("REPORT_TEST_TOKEN", secret)
    page = tmp_path / "r.html"
    assert _report("--home", root, "-o", page)[0] == 0
    html = page.read_text()
    assert secret not in html and secret[:12] not in html and "[REDACTED]" in html
    assert html.count('<details class="request">') == 2  # the transcript is there, redacted


def test_a_home_with_sections_shows_each_sections_fill(tmp_path):
    root = tmp_path / "home"
    (root / "scratchpad").mkdir(parents=True)
    sections = {"known": {"kind": "list", "limit": 4}, "about": {"kind": "text", "limit": 100}}
    (root / "config.yaml").write_text(yaml.safe_dump({"sections": sections}))
    (root / "scratchpad" / "active.yaml").write_text(
        yaml.safe_dump({"current_task": None, "about": "a small agent", "known": [{"text": "one"}, {"text": "two"}]})
    )
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([json.dumps({"tool": "done", "args": {"summary": "-"}})]))
    assert run_cli("run", "--home", str(root), "--model", f"scripted:{script}").exit_code == 0  # idle: adopts them
    page = tmp_path / "r.html"
    assert _report("--home", root, "-o", page)[0] == 0
    rows = re.findall(r'data-section="(\w+)" data-used="(\d+)" data-limit="(\d+)"', page.read_text())
    assert rows == [("about", "13", "100"), ("known", "2", "4")]


def test_a_home_that_never_ran_gets_a_page_that_says_so(tmp_path):
    root = tmp_path / "home"
    (root / "scratchpad").mkdir(parents=True)
    page = tmp_path / "r.html"
    assert _report("--home", root, "-o", page)[0] == 0
    html = page.read_text()
    assert 'data-field="state">never ran<' in html and "no cycle has run yet" in html
    assert "Timeline: 0 cycle(s)" in html and "No cycle in the window asked a model." in html


def test_the_visible_page_holds_no_python_repr(history_home, tmp_path):
    from tests.system.test_no_repr import reprs

    page = tmp_path / "r.html"
    assert _report("--home", history_home, "-o", page)[0] == 0
    markup = re.sub(r"<(script|style)[^>]*>.*?</\1>", "", page.read_text(), flags=re.S)
    text = unescape(re.sub(r"<[^>]+>", " ", markup))
    assert reprs(text) == [] and "None" not in markup


def test_the_memory_part_says_what_each_consolidation_of_the_window_merged_and_archived(home, tmp_path):
    from agent.store.archive import append_archive, sections_left_since
    from tests.cycle.test_consolidate import call, consolidate, consolidation_home
    from tests.memory.test_consolidation import good_reply

    consolidation_home(home)
    old = {"kind": "section_entry", "section": "known", "reason": "consolidate", "value": {"text": "gone"}}
    append_archive(Home.at(home), [dict(old, cycle_id="20200101_000000_01", id="known-90", replaced_by="known-91")])
    hostile = "<img src=x onerror=alert(1)>"
    assert consolidate(home, [call({"sections": {hostile: []}})]).exit_code == 3  # reverted
    assert consolidate(home, [call(good_reply())]).exit_code == 0  # known-3, known-4 into one; known-7 bare
    page = tmp_path / "r.html"
    assert _report("--home", home, "-o", page)[0] == 0
    html = page.read_text()
    rows = re.findall(r'data-consolidation="(\w+)" data-stop-reason="(\w+)"', html)
    assert [reason for _, reason in rows] == ["consolidated", "consolidation_reverted"]  # newest first
    moved = re.findall(r'data-section="known" data-merged="(\d+)" data-into="(\d+)" data-archived="(\d+)"', html)
    assert moved == [("2", "1", "1")]  # the row dated before the window is not counted
    assert hostile not in html and "&lt;img src=x onerror=alert(1)&gt;" in html  # the violation, escaped
    assert "is not a section of config.yaml" in html
    newest = rows[0][0]
    assert {row[0] for row in sections_left_since(Home.at(home), newest)} == {newest}


def test_the_archive_is_read_back_only_to_the_first_cycle_asked_for(home):
    from agent.store.archive import append_archive, sections_left_since

    row = {"kind": "section_entry", "section": "known", "reason": "evict", "value": {"text": "-"}}
    ids = ["20260101_000000_01", "20250101_000000_01", "20260102_000000_01"]  # one out of order between
    append_archive(Home.at(home), [dict(row, cycle_id=cycle_id, id=f"known-{n}") for n, cycle_id in enumerate(ids)])
    found = list(sections_left_since(Home.at(home), "20260101_000000_00"))
    assert found == [("20260102_000000_01", "known", "known-2", None, "evict")]  # stopped at the older one


# ------------------------------------------------------------------------- incidents and held cycles


def _incident_rows(html: str) -> list[dict]:
    keys = ("incident", "stop-reason", "since", "ended", "last", "cycles", "open")
    pattern = r"<tr " + r" ".join(rf'data-{k}="([^"]*)"' for k in keys) + "[^>]*>"
    return [dict(zip(keys, unescape_all(found))) for found in re.findall(pattern, html)]


def unescape_all(values: tuple) -> list[str]:
    return [unescape(v) for v in values]


def test_each_incident_is_one_row_as_status_would_tell_it_at_its_last_cycle(history_home, tmp_path):
    from agent.after.incidents import open_incident
    from agent.store.cycles import newest_first

    page = tmp_path / "r.html"
    assert _report("--home", history_home, "-o", page)[0] == 0
    rows = _incident_rows(page.read_text())
    assert len(rows) > 10 and rows == sorted(rows, key=lambda r: r["since"], reverse=True)  # newest first
    for row in rows:  # what status said when the incident's last cycle was the newest
        told = open_incident(newest_first(Home.at(history_home), before=row["last"] + "~"))
        assert (told["key"], told["since"], told["cycles"]) == (row["incident"], row["since"], int(row["cycles"]))
        assert told["stop_reason"] == row["stop-reason"]
    # the failing run on one task (its errors' numbers differ) is one incident of 6, ended by the third
    # worked cycle in a row without it (incident_close_after's default)
    (failing,) = [r for r in rows if int(r["cycles"]) == 6]
    history = json.loads(run_cli("history", "--home", str(history_home), "--json", "-n", "0").output)[::-1]
    ids = [r["cycle_id"] for r in history if r["stop_reason"] != "idle"]
    assert failing["ended"] == ids[ids.index(failing["last"]) + 3] and failing["open"] == "false"


def test_a_flapping_endpoint_is_one_incident_on_the_page_as_in_status(tmp_path):
    from agent.common.cycle_ids import following_cycle_id
    from tests.histories import _record

    root = tmp_path / "home"
    (root / "scratchpad").mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump({"prices": {}}))
    (root / "scratchpad" / "active.yaml").write_text(yaml.safe_dump({"current_task": "t"}))
    flaps = ["error", "max_iterations", "error", "max_iterations", "error", *["max_iterations"] * 3]
    start, found, ids = _now() - _dt.timedelta(hours=len(flaps)), [], []
    for n, reason in enumerate(flaps):
        ids.append(following_cycle_id(start + _dt.timedelta(hours=n), ids[-1:]))
        error = f"h:1 answered HTTP 50{n % 4}: words {n}" if reason == "error" else None
        found.append(dict(_record(ids[-1], start + _dt.timedelta(hours=n), n, reason, "t", error), task_after="t"))
        found[-1].update(error_kind="http_5xx" if error else None, error_endpoint="h:1" if error else None)
    write_history(Home.at(root), found)
    page = tmp_path / "r.html"
    assert _report("--home", root, "-o", page)[0] == 0
    [row] = _incident_rows(page.read_text())
    assert (row["since"], row["last"], row["cycles"], row["ended"]) == (ids[0], ids[4], "3", ids[7])


def _held_home(root: Path, days_ago: float) -> Path:
    """A home whose call 3 was parked `days_ago` days ago; every cycle since was held (and idle ones),
    the newest held one now (so today's window holds one, whatever the time of day)."""
    from agent.common.cycle_ids import following_cycle_id
    from tests.histories import _record

    (root / "scratchpad").mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump({"prices": {}}))
    (root / "scratchpad" / "active.yaml").write_text(yaml.safe_dump({"current_task": "ship it"}))
    start = _now() - _dt.timedelta(days=days_ago)
    reasons = ["done", "awaiting_approval", *(["idle", "held"] * int(days_ago * 6))]  # the newest held, now
    found, ids = [], []
    for n, reason in enumerate(reasons):
        moment = start + _dt.timedelta(hours=2) * (n - 1)
        ids.append(following_cycle_id(moment, ids[-1:]))
        record = _record(ids[-1], moment, n, reason, "ship it", None)
        if reason in ("held", "awaiting_approval"):
            record.update(signature="call 3", exit_code=9)
        if reason == "held":
            record.update(held_for="awaiting_approval")
        found.append(record)
    write_history(Home.at(root), found)
    return root


@pytest.mark.parametrize("days", [1, 30])
def test_a_held_home_says_held_and_its_incident_as_status_does_even_from_before_the_window(tmp_path, days):
    root = _held_home(tmp_path / "home", days_ago=3)  # with --days 1 the incident began before the window
    status = json.loads(run_cli("status", "--home", str(root), "--json").output)
    assert status["incident"]["held"] is True and status["incident"]["stop_reason"] == "awaiting_approval"
    page = tmp_path / "r.html"
    assert _report("--home", root, "-o", page, "--days", days)[0] == 0
    html = page.read_text()
    (row,) = _incident_rows(html)
    incident = status["incident"]
    assert (row["incident"], row["since"], int(row["cycles"]), row["open"]) == (
        incident["key"],
        incident["since"],
        incident["cycles"],
        "true",
    )
    assert row["stop-reason"] == "awaiting_approval" and "(held)" in html
    assert re.search(r'data-field="state">held<', html)
    fleet = json.loads(run_cli("fleet", "--json", str(root)).output)[0]
    assert fleet["state"] == "held" and any(
        i["text"].startswith("incident: ") and "held" in i["text"] for i in fleet["attention"]
    )
    (data,) = [json.loads(b) for b in re.findall(r'class="home-data"[^>]*>(.*?)</script>', html, re.S)]
    timeline = data["timeline"]
    held = [k for k, reason in enumerate(timeline["reason"]) if reason == "held"]
    assert held and {timeline["held_for"][k] for k in held} == {"awaiting_approval"}
    assert _attributes(html, "stop-reason", "count")["held"] == str(len(held))


# ------------------------------------------------------------------------- at a glance, at any density


def _data(html: str) -> list[dict]:
    return [json.loads(b) for b in re.findall(r'class="home-data"[^>]*>(.*?)</script>', html, re.S)]


def _dense_home(root: Path, cycles: int, config: dict | None = None) -> Path:
    """`cycles` cycles spread over the last 25 days, the newest an hour ago."""
    (root / "scratchpad").mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config or {"prices": {}}))
    every = _dt.timedelta(days=25) / cycles
    write_history(Home.at(root), fabricated(cycles, _now() - _dt.timedelta(hours=1), every, incident_at=None))
    return root


def test_a_dense_window_is_drawn_in_buckets_the_database_counted(tmp_path):
    from agent.cli.window import MARKS_MAX

    root = _dense_home(tmp_path / "home", MARKS_MAX * 2)
    page = tmp_path / "r.html"
    assert _report("--home", root, "-o", page)[0] == 0
    (data,) = _data(page.read_text())
    buckets = data["timeline"]
    assert buckets["width"] == 3600 and "id" not in buckets  # per hour, no cycle of its own
    assert sum(map(sum, buckets["counts"])) == MARKS_MAX * 2 and set(buckets["reasons"]) <= set(PATTERN)
    history = json.loads(run_cli("history", "--home", str(root), "--json", "--limit", "0").output)
    legend = {reason: int(n) for reason, n in _attributes(page.read_text(), "stop-reason", "count").items()}
    assert legend == dict(Counter(r["stop_reason"] for r in history))
    for start, first, last in zip(buckets["t"], buckets["first"], buckets["last"]):
        hour = _dt.datetime.fromtimestamp(start, _dt.timezone.utc).strftime("%Y%m%d_%H")
        assert first[:11] == last[:11] == hour and first <= last


def test_a_window_ten_times_as_dense_makes_a_page_no_bigger(tmp_path):
    sizes = []
    for cycles in (4_000, 40_000):
        page = tmp_path / f"{cycles}.html"
        assert _report("--home", _dense_home(tmp_path / str(cycles), cycles), "-o", page, "--detail", 0)[0] == 0
        sizes.append(page.stat().st_size)
    assert sizes[1] < sizes[0] * 1.25 and sizes[1] < 1_000_000, sizes


def test_identical_newest_cycles_fold_into_one_row_with_a_count_and_their_times(tmp_path):
    root = tmp_path / "home"
    (root / "scratchpad").mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump({"prices": {}}))
    end = _now() - _dt.timedelta(hours=1)
    write_history(Home.at(root), fabricated(40, end, EVERY, incident_at=6))
    page = tmp_path / "r.html"
    assert _report("--home", root, "-o", page)[0] == 0
    html = page.read_text()
    folded = re.findall(r'data-alike="(\d+)"[^>]*>×(\d+), (\d\d:\d\d) to (\d\d:\d\d)<', html)
    first, last = (end - EVERY * n for n in (5, 0))
    assert folded[0] == ("6", "6", first.strftime("%H:%M"), last.strftime("%H:%M"))
    assert html.count('<details class="cycle"') == 5  # five rows still: the fold made room for four others


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"model": "openai:gpt-4o-mini", "fallback_models": ["openai:the-fallback"]}, "openai:the-fallback"),
        ({"model": "openai:another"}, "openai:another"),
        (
            {
                "fallback_models": [
                    {"model": "openai:elsewhere", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "inherit"}
                ]
            },
            "openai:elsewhere",
        ),
        ({}, None),
    ],
)
def test_the_replay_hint_names_another_configured_model_or_none(tmp_path, config, named):
    root = tmp_path / "home"
    (root / "scratchpad").mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump({"prices": {}, **config}))
    records = fabricated(6, _now() - _dt.timedelta(hours=1), EVERY, incident_at=None, pattern=["done"])
    write_history(Home.at(root), [dict(r, model="openai:gpt-4o-mini") for r in records])
    page = tmp_path / "r.html"
    assert _report("--home", root, "-o", page, "--detail", 1)[0] == 0
    html = unescape(page.read_text())
    commands = re.findall(r'<pre class="command"><code>agent replay --home \S+ \S+ --model (\S+)</code>', html)
    assert commands == ([named] if named else [])
    assert ("No other model is configured" in html) is (named is None)


def test_every_cost_says_its_currency(history_home, tmp_path):
    config = yaml.safe_load((history_home / "config.yaml").read_text())
    (history_home / "config.yaml").write_text(yaml.safe_dump(dict(config, currency="EUR")))
    page = tmp_path / "r.html"
    assert _report("--home", history_home, "-o", page)[0] == 0
    html = page.read_text()
    today = re.search(r'data-field="today"[^>]*>([^<]*)<', html).group(1)
    assert re.search(r"cost (\d+\.\d{4} EUR|unpriced)", today), today
    assert "cost (EUR)</th>" in html and "USD" not in re.sub(r"<script.*?</script>", "", html, flags=re.S)


def test_the_headline_counts_the_homes_that_need_a_person_as_fleet_does(history_home, tmp_path):
    other = tmp_path / "photos"
    other.mkdir()
    page = tmp_path / "r.html"
    assert _report(history_home, other, "-o", page)[0] == 0
    fleet = json.loads(run_cli("fleet", "--json", str(history_home), str(other)).output)
    headline = re.search(r'id="headline" data-needing="(\d+)" data-homes="(\d+)">(.*?)</p>', page.read_text())
    needing = sum(row["needs_person"] for row in fleet)
    assert (int(headline.group(1)), int(headline.group(2))) == (needing, 2)
    assert f"{needing} of 2 need" in headline.group(3) and "not a home" in headline.group(3)


def test_each_incident_says_when_it_began_and_ended_and_how_long_it_lasted(history_home, tmp_path):
    page = tmp_path / "r.html"
    assert _report("--home", history_home, "-o", page)[0] == 0
    cells = re.findall(
        r'<time title="cycle ([^"]+)">(\w{3} \d\d \w{3} \d\d:\d\d UTC)</time></td>\s*<td[^>]*>'
        r'(?:<time title="cycle ([^"]+)">([^<]+)</time>|<strong>open now</strong>)</td>\s*'
        r'<td data-label="length" class="length">([^<]+)</td>',
        page.read_text(),
    )
    assert len(cells) > 10
    for since, began, ended, ended_at, length in cells:
        started = _dt.datetime.strptime(since[:15], "%Y%m%d_%H%M%S").replace(tzinfo=_dt.timezone.utc)
        assert began == started.strftime("%a %d %b %H:%M UTC")
        if ended:
            stopped = _dt.datetime.strptime(ended[:15], "%Y%m%d_%H%M%S").replace(tzinfo=_dt.timezone.utc)
            assert ended_at == stopped.strftime("%a %d %b %H:%M UTC")
            assert length == span_text((stopped - started).total_seconds())
    # one failed cycle every so often: over at the incident_close_after-th (3) good cycle, 2h apart
    assert any(length == "6h" for *_, length in cells)


def test_the_charts_begin_at_the_homes_first_cycle_when_it_came_after_the_windows_start(tmp_path):
    root = tmp_path / "home"
    (root / "scratchpad").mkdir(parents=True)
    records = fabricated(24, _now() - _dt.timedelta(hours=1), EVERY, incident_at=None)
    write_history(Home.at(root), records)
    page = tmp_path / "r.html"
    assert _report("--home", root, "-o", page, "--days", 30)[0] == 0
    (data,) = _data(page.read_text())
    first = _dt.datetime.fromisoformat(records[0]["started"]).replace(minute=0, second=0)
    assert data["range"][0] == int(first.timestamp())


def test_a_record_a_hand_edit_left_unreadable_is_counted_apart_and_breaks_nothing(history_home, tmp_path):
    from agent.store.db import records

    db = records(Home.at(history_home))
    newest = db.one("SELECT max(id) FROM cycle")[0]
    with db.write():
        db.execute("UPDATE cycle SET record = ? WHERE id = ?", ("{not json", newest))
    page = tmp_path / "r.html"
    assert _report("--home", history_home, "-o", page)[0] == 0
    shown = {reason: int(n) for reason, n in _attributes(page.read_text(), "stop-reason", "count").items()}
    assert shown["?"] == 1


def test_the_headline_says_since_when_the_worst_homes_incident_is_open(tmp_path):
    root = tmp_path / "home"
    (root / "scratchpad").mkdir(parents=True)
    (root / "config.yaml").write_text(yaml.safe_dump({"prices": {}}))
    end = _now() - _dt.timedelta(hours=1)
    write_history(Home.at(root), fabricated(40, end, EVERY, incident_at=6))
    page = tmp_path / "r.html"
    assert _report(root, tmp_path / "photos-not-made", "-o", page)[0] == 0  # not a home: the worst, no incident
    headline = re.search(r'id="headline"[^>]*>(.*?)</p>', page.read_text()).group(1)
    assert "not a home" in headline and "open since" not in headline
    assert _report(root, "-o", page)[0] == 0
    headline = re.search(r'id="headline"[^>]*>(.*?)</p>', page.read_text()).group(1)
    began = end - EVERY * 5
    assert f"open since {began:%a %d %b %H:%M} UTC (11h" in headline  # five gaps of two hours, and the hour since


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0s"), (40, "40s"), (61, "1m 1s"), (7500, "2h 5m"), (39_603, "11h"), (288_050, "3d 8h"), (None, "-")],
)
def test_a_length_is_its_largest_unit_and_the_next(seconds, shown):
    from agent.cli.page import span

    assert span(seconds) == shown
