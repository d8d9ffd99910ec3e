"""Cron conversion for KFP (robfig/cron v1, seconds first), including the five-field trap."""

import datetime
import os
import pathlib
import subprocess
import sys

import pytest
from croniter import croniter

from pipeline.cli import schedule
from pipeline.cli.scheduling import cron

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
START = datetime.datetime(2026, 11, 22, 4, 0, tzinfo=datetime.timezone.utc)


def _robfig_reading_next_runs(expr, count=3, start=None):
  """Next run times of `expr` as KFP's robfig/cron v1 would read it passed through unconverted:
  five fields as second minute hour day month (weekday *)."""
  fields = expr.split()
  if len(fields) == 5:
    fields.append("*")
  it = croniter(" ".join(fields), start, second_at_beginning=True)
  return [it.get_next(datetime.datetime) for _ in range(count)]


@pytest.mark.parametrize(
  ("given", "seconds_field", "kfp", "five"),
  [
    ("0 2 * * *", False, "0 0 2 * * *", "0 2 * * *"),
    ("  0   2 *  * * ", False, "0 0 2 * * *", "0 2 * * *"),
    ("30 4 * * 1-5", False, "0 30 4 * * 1-5", "30 4 * * 1-5"),
    ("*/15 * * * *", False, "0 */15 * * * *", "*/15 * * * *"),
    ("0 2 1,15 JUL MON-FRI", False, "0 0 2 1,15 JUL MON-FRI", "0 2 1,15 JUL MON-FRI"),
    ("0 2 ? * *", False, "0 0 2 ? * *", "0 2 ? * *"),
    ("@daily", False, "0 0 0 * * *", "0 0 * * *"),
    ("@midnight", False, "0 0 0 * * *", "0 0 * * *"),
    ("@hourly", False, "0 0 * * * *", "0 * * * *"),
    ("@weekly", False, "0 0 0 * * 0", "0 0 * * 0"),
    ("@monthly", False, "0 0 0 1 * *", "0 0 1 * *"),
    ("@yearly", False, "0 0 0 1 1 *", "0 0 1 1 *"),
    ("@annually", False, "0 0 0 1 1 *", "0 0 1 1 *"),
    ("@DAILY", False, "0 0 0 * * *", "0 0 * * *"),
    ("0 0 2 * * *", True, "0 0 2 * * *", "0 2 * * *"),
    ("30 0 2 * * *", True, "30 0 2 * * *", None),
  ],
)
def test_conversion_table(given, seconds_field, kfp, five):
  spec = cron.parse_cron(given, seconds_field=seconds_field)
  assert spec.kfp == kfp
  assert spec.five_field == five


def test_five_field_trap_is_converted_to_daily_at_two():
  spec = cron.parse_cron("0 2 * * *")
  assert spec.kfp == "0 0 2 * * *"
  runs = cron.next_runs(spec, 3, start=START)
  assert [r.isoformat() for r in runs] == [
    "2026-11-23T02:00:00+00:00",
    "2026-11-24T02:00:00+00:00",
    "2026-11-25T02:00:00+00:00",
  ]
  # What KFP does with the string it gets: the converted one reads as intended...
  assert _robfig_reading_next_runs(spec.kfp, 3, start=START) == runs
  # ...while the naive five-field string is read as second 0 of minute 2 of every hour.
  naive = _robfig_reading_next_runs("0 2 * * *", 3, start=START)
  assert [r.isoformat() for r in naive] == [
    "2026-11-22T04:02:00+00:00",
    "2026-11-22T05:02:00+00:00",
    "2026-11-22T06:02:00+00:00",
  ]


def test_descriptor_and_six_field_next_runs():
  weekly = cron.parse_cron("@weekly")
  runs = cron.next_runs(weekly, 2, start=START)  # 2026-11-22 is a Sunday.
  assert [r.isoformat() for r in runs] == ["2026-11-29T00:00:00+00:00", "2026-12-06T00:00:00+00:00"]
  every_30s = cron.parse_cron("*/30 * * * * *", seconds_field=True)
  runs = cron.next_runs(every_30s, 2, start=START)
  assert [r.isoformat() for r in runs] == ["2026-11-22T04:00:30+00:00", "2026-11-22T04:01:00+00:00"]


def test_local_cron_is_evaluated_in_local_time(monkeypatch):
  monkeypatch.setenv("TZ", "America/New_York")
  import time

  time.tzset()
  try:
    spec = cron.parse_cron("0 2 * * *")
    local_runs = cron.next_runs(spec, 1, start=START, tz=None)
    assert local_runs[0].astimezone(datetime.timezone.utc).hour == 7  # 02:00 EST = 07:00 UTC
    # The system's zone is the cron daemon's, whatever TZ the installing shell has: TZ's
    # 02:00 in Tokyo would be 17:00 UTC.
    monkeypatch.setattr(cron, "LOCALTIME", "/usr/share/zoneinfo/America/New_York")
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    lines = cron.describe_next_runs(spec, 1, local_cron=True)
    assert "07:00:00 UTC" in lines[0] and "02:00:00 EST local" in lines[0]
    before = datetime.datetime(2026, 1, 2, 12, tzinfo=datetime.timezone.utc)
    assert cron.previous_run(spec, before, local_cron=True).hour == 7
  finally:
    monkeypatch.delenv("TZ")
    time.tzset()


@pytest.mark.parametrize(
  ("given", "seconds_field", "message"),
  [
    ("", False, "Empty cron expression"),
    ("0 2 * *", False, "has 4 fields"),
    ("0 0 2 * * * *", False, "has 7 fields"),
    ("0 0 2 * * *", False, "add --seconds-field"),
    ("0 2 * * * 2026", False, "add --seconds-field"),
    ("0 2 * * *", True, "expects six fields"),
    ("61 2 * * *", False, "Invalid cron expression"),
    ("0 25 * * *", False, "Invalid cron expression"),
    ("a b c d e", False, "unknown name"),
    ("0 2 L * *", False, "L, W, #"),
    ("0 2 * * 5#3", False, "L, W, #"),
    ("0 2 15W * *", False, "L, W, #"),
    ("H 2 * * *", False, "L, W, #"),
    ("0 2 * * 7", False, "use 0 for Sunday"),
    ("0 2 * * 5-7", False, "use 0 for Sunday"),
    ("0 2 * * $(reboot)", False, "Invalid cron field"),
    ("@every 1h", False, "Unsupported cron descriptor"),
    ("@reboot", False, "Unsupported cron descriptor"),
    ("@daily", True, "does not apply"),
  ],
)
def test_invalid_cron_raises_one_clear_error(given, seconds_field, message):
  with pytest.raises(cron.ScheduleError) as info:
    cron.parse_cron(given, seconds_field=seconds_field)
  assert message in str(info.value)
  assert "\n" not in str(info.value)


def test_weekday_step_of_seven_is_allowed():
  assert cron.parse_cron("0 2 * * */7").kfp == "0 0 2 * * */7"


def test_cli_prints_kfp_cron_and_next_runs_in_dry_run(tmp_path, capsys):
  package = tmp_path / "p.yaml"
  package.write_text("{}")
  status = schedule.main(
    [
      "kubeflow",
      "--cron",
      "0 2 * * *",
      "--experiment",
      "e",
      "--job-name",
      "j",
      "--package",
      str(package),
      "--dry-run",
    ]
  )
  out = capsys.readouterr().out
  assert status == 0
  assert "KFP cron '0 0 2 * * *'" in out
  runs = [line for line in out.splitlines() if line.strip().endswith("UTC")]
  assert len(runs) == 3 and all("02:00:00 UTC" in r for r in runs)
  assert "Dry run" in out


def test_cli_invalid_cron_is_one_line_without_traceback():
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", PYTHONPATH=str(REPO_ROOT))
  result = subprocess.run(
    [
      sys.executable,
      "pipeline/schedule.py",
      "kubeflow",
      "--cron",
      "0 2 * *",
      "--experiment",
      "e",
      "--job-name",
      "j",
      "--package",
      "x.json",
    ],
    cwd=REPO_ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=60,
    check=False,
  )
  assert result.returncode == 1
  assert result.stderr.strip() == (
    "schedule.py: error: '0 2 * *' has 4 fields; pass five (minute hour day month weekday), "
    "e.g. '0 2 * * *'."
  )
  assert result.stdout == ""


def test_a_schedule_that_does_not_run_within_a_year_is_refused(monkeypatch):
  """Feb 29th: from December 2026 the next one is in 2028; from March 2027 it is within a year."""
  cron_lib = cron

  def at(day):
    monkeypatch.setattr(cron_lib, "_now_utc", lambda: day)

  at(datetime.datetime(2026, 12, 2, tzinfo=datetime.timezone.utc))
  with pytest.raises(cron_lib.ScheduleError, match=r"next run would be 2028-02-29"):
    cron_lib.parse_cron("0 2 29 2 *")
  with pytest.raises(cron_lib.ScheduleError, match="no date matches it"):
    cron_lib.parse_cron("0 2 30 2 *")
  at(datetime.datetime(2027, 3, 1, tzinfo=datetime.timezone.utc))
  assert cron_lib.parse_cron("0 2 29 2 *").five_field == "0 2 29 2 *"
