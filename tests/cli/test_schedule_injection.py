"""Crontab injection, end to end: hostile but legal values reach run_local.py unchanged when cron
runs the line (its Beam flags are checked with Beam). The rest: tests/fast/test_crontab_injection.py
"""

import os
import pathlib

import pytest

from pipeline.cli import schedule
from pipeline.cli.scheduling import crontab as crontab_lib
from tests.support import crontab_runs

JOB = "digits-nightly"


@pytest.fixture
def system_crontab(tmp_path, monkeypatch):
  """A stand-in `crontab` on PATH (tests.support.crontab_runs): (its table's file, its calls)."""
  return crontab_runs.fake_system_crontab(tmp_path, monkeypatch)


def _main(*args: str) -> int:
  return schedule.main(list(args))


# ----------------------------------------------------------------------------- quoted


def test_hostile_but_legal_values_reach_run_local_unchanged_when_cron_runs_the_line(
  tmp_path, system_crontab
):
  store, _ = system_crontab
  pwned = tmp_path / "PWNED"
  record = tmp_path / "argv"
  fake_python = crontab_runs.executable(
    tmp_path / "fake-python", f"#!/bin/sh\nprintf '%s\\0' \"$@\" > '{record}'\n"
  )
  out = str(tmp_path / f"o ut's $(touch {pwned}) `touch {pwned}` ; 100% \\% *")
  hostile = [
    "50% off", "a\\%b", "\\", "'", f"$(touch {pwned})", "*", "%%", "\\\\%", "é ✓",
    f"; touch {pwned} #",
  ]  # fmt: skip
  # Values of a real run_local.py flag (install checks the job's flags as run_local.py would).
  extra = [f"--beam-arg=--labels={value}" for value in hostile]
  status = _main(
    "local", "install", "--cron", "0 2 * * *", "--output-dir", out, "--job-name", JOB,
    "--python", fake_python, "--", *extra,
  )  # fmt: skip
  assert status == 0
  text = store.read_bytes().decode("utf-8", "surrogateescape")
  [entry] = crontab_lib.find_entries(text, JOB)
  assert "\n" not in entry.line and "%" not in entry.line.replace("\\%", "")

  # Only our line: the user's lines are not ours to run.
  crontab_runs.run_like_cron(entry.line, tmp_path)
  night = ["pipeline/schedule.py", "local", "night", "--output-dir", out, "--job-name", JOB]
  assert record.read_bytes().split(b"\0")[:-1] == [
    os.fsencode(a) for a in [*night, "--time-limit", "6h", "--", *extra]
  ]
  assert not pwned.exists()
  assert (pathlib.Path(out) / "logs" / "nightly.log").is_file()
