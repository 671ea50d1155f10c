"""agent/after/health.py's judge: one state per home from what was read of it, `ok` only when
nothing needs a person."""

from __future__ import annotations

from agent.after.health import Facts, judge, problem
from agent.common.schedule import checked

NOW = 1_800_000_000.0


def _ran(ago: float, reason: str = "done") -> dict:
    return {"cycle_id": "20270115_080000", "stop_reason": reason, "started": NOW - ago - 5, "ended": NOW - ago}


def test_a_broken_file_outranks_an_incident_and_is_one_item_naming_it():
    incident = {"key": "error:x", "stop_reason": "error", "held": False}
    broken = problem("rules.md", "is not UTF-8 text", "fix it")
    health = judge(Facts(now=NOW, last=_ran(60, "error"), incident=incident, incident_text="x", problems=[broken]))
    assert health["state"] == "broken" and health["needs_person"]
    assert [item["text"] for item in health["attention"] if item["key"].startswith("file:")] == [
        "rules.md: is not UTF-8 text; fix it"
    ]


def test_a_tell_entry_needs_a_person_under_the_same_key_every_time():
    facts = Facts(now=NOW, last=_ran(60), surfaced=[{"section": "tell", "id": "tell-3", "text": "disk nearly full"}])
    first, again = judge(facts), judge(facts)
    assert first["state"] == "surfaced" and first["needs_person"]
    assert [i["key"] for i in first["attention"]] == [i["key"] for i in again["attention"]] == ["tell:tell:tell-3"]


def test_a_late_slot_is_said_but_needs_nobody():
    schedule = checked("*/10 * * * *", "UTC", 3600)
    health = judge(Facts(now=NOW, last=_ran(25 * 60), schedule=schedule, cycles=[(NOW - 1505, NOW - 1500)]))
    assert (health["state"], health["needs_person"], health["schedule"]["late"]) == ("late", False, True)


def test_a_missed_slot_is_down_however_short_the_median_gap_says_it_is():
    schedule = checked("0 * * * *", "UTC", 600)
    facts = Facts(now=NOW, last=_ran(3 * 3600), schedule=schedule, cycles=[(NOW - 3 * 3600 - 5, NOW - 3 * 3600)])
    facts.stale_after_s = 10 * 86400  # without the schedule it would not be stale for ten days
    health = judge(facts)
    assert health["state"] == "down" and health["schedule"]["missed"] == 2  # 2 and 1 hours ago; now: within grace


def test_a_cycle_running_longer_than_stale_after_stays_running_and_needs_a_person():
    last = dict(_ran(0), ended=None, started=NOW - 7200, source="snapshots")
    health = judge(Facts(now=NOW, last=last, running=True, stale_after_s=3600))
    assert (health["state"], health["needs_person"]) == ("running", True)


def test_a_hung_cycle_needs_a_person_even_though_it_meets_every_slot_of_its_schedule():
    """A cycle holding the lock meets each slot (a cron run that found it busy is covered by it), so
    under a schedule nothing is missed while it hangs: its age says it needs a person."""
    schedule = checked("*/10 * * * *", "UTC", 600)
    last = dict(_ran(0), ended=None, started=NOW - 7200, source="snapshots")
    health = judge(
        Facts(now=NOW, last=last, running=True, stale_after_s=3600, schedule=schedule, cycles=[(NOW - 7200, NOW)])
    )
    assert (health["state"], health["needs_person"]) == ("running", True)
    assert [item["text"] for item in health["attention"]] == ["a cycle has run for 2h (stale after 1h)"]
