"""`agent report`'s page in a real browser: headless Chromium (Debian's package), the network off, the
page opened from file://. What the page shows is checked against `agent history --json` and `agent
status --json`; nothing a model wrote may run.

`AGENT_REPORT_SCREENSHOTS=docs python -m pytest tests/system/test_report_page.py -k glance` writes the
README's screenshots (docs/report.png at 1400 px wide, docs/report-phone.png at 420 px: the top of
the page over homes in every state) from that test: they are never made by hand.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from agent.after.incidents import record_kind
from agent.common.outcomes import StopReason
from tests.chromium import Chromium
from tests.helpers import run_cli
from tests.histories import HOSTILE_TASK, INCIDENT_LENGTH, INCIDENT_TASK, MODELS, long_home

pytestmark = pytest.mark.slow

EVERY = _dt.timedelta(minutes=30)
PNG = b"\x89PNG\r\n\x1a\n"
SCREENSHOT_HEIGHT = {
    1400: 2600,
    420: 1600,
}  # the README's pictures: the headline and the index (a home's part too, wide)

# What the page shows, read from its DOM (data-* attributes and text), one home's part at a time.
READ_HOME = r"""
(section => {
  const f = name => section.querySelector(`[data-field="${name}"]`);
  const rows = [...section.querySelectorAll('table.days tbody tr[data-day]')];
  return {
    state: f('state').textContent,
    last_cycle: f('last_cycle') && f('last_cycle').dataset.value,
    last_outcome: f('last_outcome') && f('last_outcome').textContent,
    approvals_pending: f('approvals_pending') && Number(f('approvals_pending').dataset.value),
    today: f('today') && {...f('today').dataset},
    month: f('month') && {...f('month').dataset},
    current_task: f('current_task') && f('current_task').textContent,
    counts: Object.fromEntries([...section.querySelectorAll('ul.legend li')].map(
      li => [li.dataset.stopReason, Number(li.dataset.count)])),
    days: rows.map(tr => ({day: tr.dataset.day, cycles: Number(tr.dataset.cycles),
      tokens: Number(tr.dataset.tokens), cost: Number(tr.dataset.cost), unpriced: Number(tr.dataset.unpriced)})),
    models: [...section.querySelectorAll('table.days thead th')].slice(4).map(th => th.textContent.replace(/ \(USD\)$/, '')),
    details: [...section.querySelectorAll('details.cycle')].map(d => d.dataset.cycle),
    charts: section.querySelectorAll('.uplot canvas').length,
    incidents: [...section.querySelectorAll('table.incidents tr[data-incident]')].map(tr => ({...tr.dataset})),
  };
})
"""


# The timeline's row (y) of each stop reason's marks: the ones that asked no model are drawn apart, below.
TIMELINE_ROWS = """(() => {
  const u = window.agentReport.timelines[0];
  return Object.fromEntries(u.series.slice(1).map((s, k) => [s.label, [...new Set(u.data[k + 1].filter(v => v != null))]]));
})()"""


def _json(*args: str):
    result = run_cli(*args)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)


@pytest.fixture(scope="module")
def long_history(tmp_path_factory) -> Path:
    """1,603 cycles 30 minutes apart (33 days: the window holds 30 of them, a mark each), every stop
    reason, three models, an incident; the newest three are real cycles, the first of them on the
    hostile task."""
    folder = tmp_path_factory.mktemp("report")
    end = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0) - EVERY * 4
    return long_home(folder / "home", 1600, end, EVERY).root


def _page(tmp_path: Path, *args: str) -> Path:
    page = tmp_path / "report.html"
    result = run_cli("report", *args, "-o", str(page))
    assert result.exit_code == 0, result.output
    return page


def _window(history: list[dict], page: dict) -> list[dict]:
    since = min(day["day"] for day in page["days"]).replace("-", "")
    return [r for r in history if r["cycle_id"][:8] >= since]


def _assert_offline_and_clean(browser: Chromium) -> None:
    assert browser.errors == []
    assert browser.requests and all(url.startswith("file://") for url in browser.requests), browser.requests
    assert browser.dialogs == []
    assert browser.evaluate("window.__pwned === undefined") is True


def _hover_the_hostile_cycle(browser: Chromium) -> dict:
    """Put the timeline's cursor on a cycle of the hostile task (as a hover would), then hover and click
    with the mouse: what the tooltip and the pinned panel show."""
    return browser.evaluate(
        """(() => {
      const u = window.agentReport.timelines[0];
      u.over.scrollIntoView({block: 'center'});
      const tl = JSON.parse(document.querySelector('script.home-data').textContent).timeline;
      const i = tl.task.findIndex(k => tl.tasks[k] === %s);
      u.setCursor({left: u.valToPos(tl.t[i], 'x'), top: 5});
      const tip = document.getElementById('tooltip-0');
      const box = u.over.getBoundingClientRect();
      return {id: tl.id[i], text: tip.textContent, hidden: tip.hidden, elements: tip.querySelectorAll('img, b, script').length,
              x: box.left + box.width / 2, y: box.top + box.height / 2};
    })()"""
        % json.dumps(HOSTILE_TASK)
    )


def test_the_report_of_a_long_history_opens_offline_and_says_what_history_and_status_say(long_history, tmp_path):
    root = str(long_history)
    page = _page(tmp_path, "--home", root)
    history = _json("history", "--home", root, "--json", "--limit", "0")
    daily = _json("history", "--home", root, "--daily", "--json", "--limit", "30")
    status = _json("status", "--home", root, "--json")
    with Chromium(tmp_path / "profile") as browser:
        browser.open(page.as_uri())
        assert browser.evaluate("document.body.dataset.drawn") == "true"
        shown = browser.evaluate(f"{READ_HOME}(document.querySelector('section.home'))")
        rows = browser.evaluate(TIMELINE_ROWS)
        hovered = _hover_the_hostile_cycle(browser)
        browser.mouse("mouseMoved", hovered["x"], hovered["y"])
        tooltip = browser.evaluate(
            "[document.getElementById('tooltip-0').hidden, document.getElementById('tooltip-0').textContent]"
        )
        browser.mouse("mousePressed", hovered["x"], hovered["y"])
        browser.mouse("mouseReleased", hovered["x"], hovered["y"])
        pinned = browser.evaluate("document.getElementById('pinned-0').textContent")
        text = browser.evaluate("document.body.innerText")
        picture = browser.screenshot()
        _assert_offline_and_clean(browser)
    assert picture.startswith(PNG) and len(picture) > 50_000

    # the health fields are status's
    last = status["last_cycle"]
    assert (shown["last_cycle"], shown["last_outcome"]) == (last["cycle_id"], last["stop_reason"])
    assert shown["approvals_pending"] == status["approvals"]["pending"]
    assert shown["current_task"] == status["current_task"]
    for period in ("today", "month"):
        spent = status["spending"][period]
        assert (int(shown[period]["cycles"]), int(shown[period]["tokens"])) == (spent["cycles"], spent["tokens"])
        assert float(shown[period]["cost"]) == pytest.approx(spent["cost"])
    # the counts per stop reason are history's, over the window; every stop reason is among them
    window = _window(history, shown)
    assert len(history) == 1603 and 1000 < len(window) < len(history)
    assert shown["counts"] == dict(Counter(r["stop_reason"] for r in window))
    assert {reason.value for reason in StopReason} <= set(shown["counts"])
    # the cost per day is history --daily's, by model too (from the page's first day: past midnight
    # the page's 30 days end on a day with no cycles yet, so history's 30 newest reach one further back)
    daily = [d for d in daily if d["day"] >= min(day["day"] for day in shown["days"])]
    assert shown["days"] == [
        {
            "day": d["day"],
            "cycles": d["cycles"],
            "tokens": d["tokens"],
            "cost": d["cost"],
            "unpriced": d["unpriced_cycles"],
        }
        for d in daily
    ]
    assert set(MODELS) <= set(shown["models"]) and shown["charts"] == 3
    # one row per stop reason; idle and held cycles each on a row of their own, below the others
    assert set(rows) == set(shown["counts"]) and all(len(ys) == 1 for ys in rows.values())
    assert rows["idle"] == [-1] and rows["held"] == [-2]
    assert sorted(y for r, (y,) in rows.items() if r not in ("idle", "held")) == list(range(1, len(rows) - 1))
    # the incidents: the newest first, the one open now is status's
    assert shown["incidents"] and shown["incidents"] == sorted(shown["incidents"], key=lambda i: i["since"])[::-1]
    opened = [i for i in shown["incidents"] if i["open"] == "true"]
    told = status["incident"]
    assert [(i["incident"], i["since"], int(i["cycles"])) for i in opened] == (
        [(told["key"], told["since"], told["cycles"])] if told else []
    )
    worked = [r for r in history if r["stop_reason"] not in ("idle", "held")]
    alike = [(r["stop_reason"], r["task_before"], record_kind(r) if r["error"] else None) for r in worked]
    folded = [r["cycle_id"] for n, r in enumerate(worked) if n == 0 or alike[n] != alike[n - 1]]
    assert shown["details"] == folded[:5]  # newest first, idle cycles left out, identical neighbours folded
    # the hostile task is text wherever it shows, and nothing of it ran
    assert hovered["hidden"] is False and hovered["elements"] == 0 and HOSTILE_TASK in hovered["text"]
    assert tooltip[0] is False and "cycle" in tooltip[1]
    assert pinned.startswith("cycle") and "stop reason" in pinned
    assert HOSTILE_TASK in text and INCIDENT_TASK in json.dumps(history)


def test_an_index_over_three_homes_puts_the_ones_that_need_a_person_first(long_history, tmp_path):
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    parked = tmp_path / "parked"  # its real cycle's write_file waits for the operator
    long_home(parked, 40, now - EVERY * 4, EVERY, real=1, incident_at=None, approval_required=["write_file"])
    stale = tmp_path / "stale"  # its newest cycle three days ago
    long_home(stale, 40, now - _dt.timedelta(days=3), EVERY, real=1, incident_at=None)
    homes = [str(long_history), str(parked), str(stale)]
    page = _page(tmp_path, *homes)
    fleet = {row["home"]: row for row in _json("fleet", "--json", *homes)}
    with Chromium(tmp_path / "profile") as browser:
        browser.open(page.as_uri())
        index = browser.evaluate(
            """[...document.querySelectorAll('#index tr.home-row')].map(tr => ({
              home: tr.dataset.home, state: tr.dataset.state, needs: tr.dataset.needsPerson === 'true',
              outcome: tr.querySelector('[data-field="last_outcome"]').textContent,
              approvals: Number(tr.querySelector('[data-field="approvals_pending"]').dataset.value),
              cost: Number(tr.querySelector('[data-field="cost_today"]').dataset.value),
              link: tr.querySelector('a').getAttribute('href'),
              target: document.querySelector(tr.querySelector('a').getAttribute('href')).dataset.home}))"""
        )
        parts = browser.evaluate(f"[...document.querySelectorAll('section.home')].map(s => {READ_HOME}(s))")
        picture = browser.screenshot()
        _assert_offline_and_clean(browser)
    assert picture.startswith(PNG)
    assert [(row["home"], row["state"], row["needs"]) for row in index] == [
        (str(parked), "parked", True),  # parked before stale: the more pressing state
        (str(stale), "down", True),  # no cycle for three days: down, never a green ok
        (str(long_history), "ok", False),
    ]
    assert index[0]["approvals"] == 1
    for row in index:
        status = _json("status", "--home", row["home"], "--json")
        assert row["state"] == fleet[row["home"]]["state"] and row["needs"] == fleet[row["home"]]["needs_person"]
        assert row["outcome"] == status["last_cycle"]["stop_reason"]
        assert row["approvals"] == status["approvals"]["pending"]
        assert row["cost"] == pytest.approx(status["spending"]["today"]["cost"])
        assert row["target"] == row["home"]
    assert [part["last_cycle"] for part in parts] == [
        _json("status", "--home", row["home"], "--json")["last_cycle"]["cycle_id"] for row in index
    ]


# ------------------------------------------------------------------ at a glance, on a laptop and a phone

DENSE_EVERY = _dt.timedelta(minutes=10)
CSP_WATCH = (  # added by the protocol before the page's own scripts: what the policy refused, if anything
    "window.__csp = []; document.addEventListener('securitypolicyviolation', "
    "e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"
)
READ_GLANCE = """(() => {
  const items = el => [...el.querySelectorAll('ul.attention li')].map(li => li.textContent);
  return {
    headline: Number(document.getElementById('headline').dataset.needing),
    headline_text: document.getElementById('headline').textContent,
    index: [...document.querySelectorAll('#index tr.home-row')].map(tr => ({
      home: tr.dataset.home, chip: tr.querySelector('[data-field="state"]').textContent, items: items(tr)})),
    parts: [...document.querySelectorAll('section.home')].map(s => ({
      home: s.dataset.home, chip: s.querySelector('h2 [data-field="state"]').textContent,
      items: s.querySelector('[data-field="attention"]') ? items(s.querySelector('[data-field="attention"]')) : null,
      problem: !!s.querySelector('[data-field="problem"]')})),
    wide: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
    csp: window.__csp,
  };
})()"""


def _tap_the_newest_mark(browser: Chromium, n: int) -> dict:
    """Where the newest mark (or bucket) of home part `n`'s timeline is on the screen, scrolled into view."""
    return browser.evaluate(
        """(() => {
      const u = window.agentReport.timelines[%d];
      u.over.scrollIntoView({block: 'center'});
      const tl = u.drawn;
      const i = tl.t.length - 1;
      const k = u.data.findIndex((ys, s) => s > 0 && ys[i] != null);
      const box = u.over.getBoundingClientRect();
      return {x: box.left + u.valToPos(tl.t[i], 'x'), y: box.top + u.valToPos(u.data[k][i], 'y'),
              id: tl.width ? tl.last[i] : tl.id[i], bucket: !!tl.width};
    })()"""
        % n
    )


def _mid_bucket(now: _dt.datetime) -> _dt.datetime:
    """A time before `now` that lies inside a bucket of every width the page draws (1, 3, 6, 12 and 24
    hours, aligned to UTC midnight), never near one's edge: 5 h 20 min after a 12-hour boundary. The
    dense home's newest cycle is put there, so the test does not depend on the hour it runs at (in
    the first hour after 00:00 or 12:00 UTC the tap on the newest bucket met the one before it)."""
    shifted = now - _dt.timedelta(hours=5, minutes=20)
    start = shifted.replace(hour=shifted.hour - shifted.hour % 12, minute=0, second=0)
    return start + _dt.timedelta(hours=5, minutes=20)


@pytest.fixture(scope="module")
def every_state(tmp_path_factory) -> dict[str, Path]:
    """Homes in each state the health model gives: ok, failing (its newest six cycles fail alike),
    parked, stale (no cycle for three days), broken (a config.yaml no cycle can use), never ran, a
    folder that is not a home, and a dense one (2,600 cycles ten minutes apart: drawn in buckets)."""
    folder = tmp_path_factory.mktemp("states")
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    homes = {
        "ok": long_home(folder / "ok", 60, now - EVERY * 4, EVERY, real=1, incident_at=None).root,
        "failing": long_home(folder / "failing", 60, now - EVERY, EVERY, real=0, incident_at=INCIDENT_LENGTH).root,
        "parked": long_home(
            folder / "parked", 40, now - EVERY * 4, EVERY, real=1, incident_at=None, approval_required=["write_file"]
        ).root,
        "down": long_home(folder / "down", 40, now - _dt.timedelta(days=3), EVERY, real=1, incident_at=None).root,
        "broken": long_home(folder / "broken", 40, now - EVERY * 4, EVERY, real=1, incident_at=None).root,
        "dense": long_home(folder / "dense", 2600, _mid_bucket(now) - DENSE_EVERY, DENSE_EVERY, real=1).root,
        "never ran": folder / "never-ran",
        "not a home": folder / "photos",
    }
    (homes["broken"] / "config.yaml").write_text("daily_cost_budget: -1\n")
    (homes["never ran"] / "scratchpad").mkdir(parents=True)
    homes["not a home"].mkdir()
    return homes


@pytest.mark.parametrize("width", [1400, 420])
def test_the_page_reads_at_a_glance_on_a_laptop_and_a_phone(every_state, tmp_path, width):
    homes = [str(root) for root in every_state.values()]
    page = _page(tmp_path, *homes)
    fleet = _json("fleet", "--json", *homes)
    part = {home: n for n, home in enumerate(_part_order(page))}
    with Chromium(tmp_path / "profile", width=width, height=900) as browser:
        browser.call("Page.addScriptToEvaluateOnNewDocument", {"source": CSP_WATCH})
        browser.open(page.as_uri())
        seen = browser.evaluate(READ_GLANCE)
        if os.environ.get("AGENT_REPORT_SCREENSHOTS"):
            name = "report.png" if width == 1400 else "report-phone.png"
            picture = browser.screenshot(SCREENSHOT_HEIGHT[width])
            (Path(os.environ["AGENT_REPORT_SCREENSHOTS"]) / name).write_bytes(picture)
        failing, dense = part[str(every_state["failing"])], part[str(every_state["dense"])]
        taps = []
        for n in (failing, dense):
            mark = _tap_the_newest_mark(browser, n)
            browser.tap(mark["x"], mark["y"])
            taps.append((mark, browser.evaluate(f"document.getElementById('pinned-{n}').textContent")))
        incident = browser.evaluate(
            f"""(() => {{ const tr = document.querySelectorAll('section.home')[{failing}]
                 .querySelector('table.incidents tr[data-open="true"]');
               return {{started: tr.querySelector('td.when').textContent, length: tr.querySelector('td.length').textContent}}; }})()"""
        )
        legend = browser.evaluate(
            f"""(() => {{ const u = window.agentReport.days[{failing}][0], list = document.getElementById('tokens-legend-{failing}');
               const read = () => [...list.querySelectorAll('li')].map(li => li.textContent);
               const before = read();
               u.setCursor({{left: u.valToPos(u.data[0][0], 'x'), top: 10}});
               const hovered = read();
               u.setCursor({{left: -10, top: -10}});
               return {{before, hovered, after: read()}}; }})()"""
        )
        wide_after = browser.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        printed = browser.call("Page.printToPDF", {"paperWidth": 8.27, "paperHeight": 11.69, "preferCSSPageSize": True})
        _assert_offline_and_clean(browser)
    assert base64.b64decode(printed["data"]).startswith(b"%PDF")  # it prints, on A4
    # no CSP violation, no script error (_assert_offline_and_clean), and at 420 px nothing wider than the screen
    assert seen["csp"] == []
    if width == 420:
        assert seen["wide"][0] <= seen["wide"][1] and wide_after[0] <= wide_after[1], (seen["wide"], wide_after)
    # the headline's count is fleet's, and every chip agrees with its home's "needs a person" list
    assert seen["headline"] == sum(row["needs_person"] for row in fleet) >= 6
    assert f"{seen['headline']} of 8 need a person" in seen["headline_text"]
    for row in [*seen["index"], *seen["parts"]]:
        assert (row["chip"] in ("ok", "idle")) == (row["items"] == []), row
    chips = {row["home"]: row["chip"] for row in seen["index"]}
    assert chips == {row["home"]: row["state"] for row in fleet}  # the health model's word, as fleet says it
    named = {name: chips[str(root.absolute())] for name, root in every_state.items() if name != "dense"}
    assert named == {name: name for name in named}  # each home in the state it was made for
    # the open incident says when it began and how long it has lasted
    assert re.fullmatch(r"\w{3} \d{2} \w{3} \d{2}:\d{2} UTC", incident["started"]), incident
    assert re.fullmatch(r"\d+[dhms]( \d+[dhms])?", incident["length"]), incident
    # the per-day legends give the window's totals until a day is hovered, and again after
    assert legend["before"][0].startswith("the 30 day(s)") and legend["after"] == legend["before"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", legend["hovered"][0]) and legend["hovered"] != legend["before"]
    # a tap on a mark shows its cycle; on a bucket, its counts and its first and last cycle
    (mark, pinned), (bucket, counted) = taps
    assert not mark["bucket"] and pinned.startswith("cycle") and mark["id"] in pinned
    assert bucket["bucket"] and "first cycle" in counted and bucket["id"] in counted


def _part_order(page: Path) -> list[str]:
    """The homes in the order the page's parts come (most pressing first)."""
    return re.findall(r'<section class="home" id="home-\d+" data-home="([^"]*)"', page.read_text())
