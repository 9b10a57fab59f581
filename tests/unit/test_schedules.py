"""The schedule of a task: cron occurrences in its time zone across daylight-saving changes, and
the validation of what a task is made of."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from adapters.scheduling.cron import CronsimSchedule
from domain.errors import Invalid
from domain.schedules import (
    INVALID_CRON,
    UNKNOWN_TIME_ZONE,
    validate_prompt,
    validate_task_name,
    validate_timezone,
)

CRON = CronsimSchedule()


def occurrences(cron: str, zone: str, start: datetime, count: int) -> list[datetime]:
    """The next `count` occurrences after `start`, as the scheduler walks them (each claim asks
    for the first occurrence after the one it ran)."""
    found, at = [], start
    for _ in range(count):
        at = CRON.next_occurrence(cron, zone, at)
        found.append(at)
    return found


def local(times: list[datetime], zone: str) -> list[str]:
    return [t.astimezone(ZoneInfo(zone)).strftime("%m-%d %H:%M %Z") for t in times]


@pytest.mark.parametrize(
    ("zone", "day_before", "expected"),
    [
        # 2026-03-08 02:00 EST becomes 03:00 EDT: 02:30 does not exist that day.
        (
            "America/New_York",
            datetime(2026, 3, 7, 12, tzinfo=UTC),
            ["03-08 03:00 EDT", "03-09 02:30 EDT"],
        ),
        # 2026-03-29 02:00 CET becomes 03:00 CEST.
        (
            "Europe/Berlin",
            datetime(2026, 3, 28, 12, tzinfo=UTC),
            ["03-29 03:00 CEST", "03-30 02:30 CEST"],
        ),
    ],
)
def test_a_time_skipped_by_spring_forward_runs_at_the_first_minute_after_the_gap(
    zone, day_before, expected
):
    assert local(occurrences("30 2 * * *", zone, day_before, 2), zone) == expected


@pytest.mark.parametrize(
    ("zone", "day_before", "expected"),
    [
        # 2026-11-01 02:00 EDT falls back to 01:00 EST: 01:30 comes twice, and runs once.
        (
            "America/New_York",
            datetime(2026, 10, 31, 12, tzinfo=UTC),
            ["11-01 01:30 EDT", "11-02 01:30 EST"],
        ),
        # 2026-10-25 03:00 CEST falls back to 02:00 CET: 02:30 comes twice.
        (
            "Europe/Berlin",
            datetime(2026, 10, 24, 12, tzinfo=UTC),
            ["10-25 02:30 CEST", "10-26 02:30 CET"],
        ),
    ],
)
def test_a_time_repeated_by_fall_back_runs_once(zone, day_before, expected):
    cron = "30 1 * * *" if zone == "America/New_York" else "30 2 * * *"
    assert local(occurrences(cron, zone, day_before, 2), zone) == expected


def test_an_hourly_schedule_keeps_real_hours_through_both_changes():
    zone = "Europe/Berlin"
    spring = occurrences("0 * * * *", zone, datetime(2026, 3, 29, 0, 30, tzinfo=UTC), 3)
    assert [t.hour for t in spring] == [1, 2, 3]  # UTC: no hour lost or doubled
    autumn = occurrences("0 * * * *", zone, datetime(2026, 10, 24, 23, 30, tzinfo=UTC), 4)
    assert [t - autumn[0] for t in autumn] == [timedelta(hours=h) for h in range(4)]


def test_weekday_mornings_in_a_zone_are_utc_instants_of_that_zone():
    friday_evening = datetime(2026, 11, 20, 18, tzinfo=UTC)
    found = occurrences("0 8 * * 1-5", "Europe/Berlin", friday_evening, 2)
    assert found == [
        datetime(2026, 11, 23, 7, tzinfo=UTC),
        datetime(2026, 11, 24, 7, tzinfo=UTC),
    ]


def test_the_next_occurrence_is_strictly_after_the_moment_given():
    at = datetime(2026, 1, 1, 8, 0, tzinfo=UTC)
    assert CRON.next_occurrence("0 8 * * *", "UTC", at) == datetime(2026, 1, 2, 8, tzinfo=UTC)
    assert CRON.next_occurrence("0 8 * * *", "UTC", at - timedelta(seconds=1)) == at


@pytest.mark.parametrize(
    ("given", "kept"),
    [("0 8 * * 1-5", "0 8 * * 1-5"), ("  */15   *  * * * ", "*/15 * * * *"), ("@DAILY", "@daily")],
)
def test_valid_cron_expressions_are_kept_normalised(given, kept):
    assert CRON.validate(given) == kept
    assert CRON.next_occurrence(kept, "UTC", datetime(2026, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize(
    "bad",
    ["", "   ", "* * * *", "* * * * * *", "61 * * * *", "* 25 * * *", "a b c d e", "@reboot",
     "@yearly", 5, None, "x" * 300],
)  # fmt: skip
def test_invalid_cron_expressions_are_refused(bad):
    with pytest.raises(Invalid) as refused:
        CRON.validate(bad)
    assert refused.value.message == INVALID_CRON


def test_time_zones_are_iana_names_and_utc_by_default():
    assert validate_timezone(None) == "UTC"
    assert validate_timezone("America/New_York") == "America/New_York"
    for bad in ["Mars/Olympus", "", "../etc/passwd", "Europe/Berlin\x00", 3]:
        with pytest.raises(Invalid) as refused:
            validate_timezone(bad)
        assert refused.value.message == UNKNOWN_TIME_ZONE


def test_prompts_and_names_follow_their_limits():
    assert validate_prompt("x" * 20_000)
    for bad in ["", "   ", "x" * 20_001, "a\x00b", None]:
        with pytest.raises(Invalid):
            validate_prompt(bad)
    assert validate_task_name("  Morning digest ") == "Morning digest"
    for bad in ["", "two\nlines", "x" * 121]:
        with pytest.raises(Invalid):
            validate_task_name(bad)
