"""Times as a person reads them: a moment in UTC without a locale, a length in two units or its largest one."""

from __future__ import annotations

import datetime as _dt

import pytest

from agent.common.times import age_text, moment_text, record_ended, record_started, span_text


def test_a_moment_is_its_day_date_and_minute_in_utc():
    zone = _dt.timezone(_dt.timedelta(hours=2))
    assert moment_text(_dt.datetime(2026, 11, 28, 10, 0, tzinfo=_dt.timezone.utc)) == "Sat 28 Nov 10:00 UTC"
    assert moment_text(_dt.datetime(2026, 11, 28, 12, 5, tzinfo=zone)) == "Sat 28 Nov 10:05 UTC"


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0, "0s"),
        (45.9, "45s"),
        (720, "12m"),
        (3 * 3600 + 5 * 60, "3h 5m"),
        (86400, "1d"),
        (3 * 86400 + 8 * 3600, "3d 8h"),
    ],
)
def test_a_length_is_its_two_largest_units(seconds, text):
    assert span_text(seconds) == text


def test_a_record_starts_when_it_says_and_ends_after_its_duration_or_at_its_ids_time():
    record = {"cycle_id": "20261128_100000_01", "started": "2026-11-28T10:00:01+00:00", "duration_s": 59}
    assert record_started(record) == _dt.datetime(2026, 11, 28, 10, 0, 1, tzinfo=_dt.timezone.utc)
    assert record_ended(record) == _dt.datetime(2026, 11, 28, 10, 1, tzinfo=_dt.timezone.utc)
    odd = {"cycle_id": "20261128_100000_01", "started": "not a time", "duration_s": "long"}
    assert record_started(odd) == record_ended(odd) == _dt.datetime(2026, 11, 28, 10, 0, tzinfo=_dt.timezone.utc)
    assert record_started({"cycle_id": "hand-made"}) is None


@pytest.mark.parametrize(
    ("seconds", "text"), [(-5, "0s"), (45.9, "45s"), (60, "1m"), (7199, "1h"), (86400 * 5 + 1, "5d")]
)
def test_age_text_is_the_largest_whole_unit(seconds: float, text: str):
    assert age_text(seconds) == text
