"""The nightly job as cron runs it, around a stand-in for run_local.py: a night past its limit,
a night that finds the lock held, a missing night, and `run-now` running the installed line with
cron's environment.

run_local.py is stood in for by a shell script given as `--python` (it hangs, or exits with a
chosen status); the nights are recorded in a real local serving folder and notified to a
loopback webhook. In this layer the job's own process may not import TensorFlow, Beam or TFX
(tests/support/tf_free.py), so recording a night it ended or skipped costs no second of
imports. The same job around a real run, and on an object store's serving folder, is in
tests/cli/test_night_job.py.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import signal
import subprocess
import time

import pytest

from components.nights import nights_lib
from components.serving import nights
from tests.support import crontab_runs, notify_servers
from tests.support.cli_runs import REPO_ROOT, project_env
from tests.support.crontab_runs import night as _night

MODEL = crontab_runs.NIGHT_MODEL


def _running(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rpartition(")")[2].split()[0] != "Z"
  except FileNotFoundError:
    return False


@pytest.fixture
def serving(tmp_path):
  folder = tmp_path / "out" / "serving"
  (folder / MODEL).mkdir(parents=True)
  return folder


@pytest.mark.timeout(300)
def test_a_night_past_its_limit_is_stopped_recorded_and_notified_and_the_next_one_runs(
  tmp_path, serving
):
  out = tmp_path / "out"
  pids = tmp_path / "pids"
  # A run that hangs, with a child of its own (as Beam's or the trainer's workers are).
  hangs = crontab_runs.executable(
    tmp_path / "hangs",
    f'#!/bin/sh\necho "$TFXKIT_NIGHT_ID" > {tmp_path}/night\n'
    f"sleep 600 & echo $! > {pids}\nsleep 600\n",
  )
  with notify_servers.http_server() as hook:
    target = f"json://127.0.0.1:{hook.server_address[1]}/night"
    proc = _night(out, hangs, "--notify", target, limit="3s")
    assert proc.returncode == 124, proc.stderr
    (record,) = nights.read_records(str(serving), MODEL)
    assert record["outcome"] == nights_lib.TIMED_OUT
    assert record["night"] == (tmp_path / "night").read_text().strip()
    assert "ran past its limit of 3 s" in record["line"]
    (posted,) = hook.requests
    assert "night timed out: the night ran past" in posted["json"]["title"]
  # The whole group was stopped, its child too (gone, or a zombie its new parent has not
  # collected yet).
  assert not _running(int(pids.read_text()))
  log = (out / "logs" / "nightly.log").read_text()
  assert "==== night " in log and "ended with exit status 124" in log
  # The lock went with the job: the next night runs (and exits with its run's own status).
  exits_2 = crontab_runs.executable(tmp_path / "exits-2", "#!/bin/sh\nexit 2\n")
  assert _night(out, exits_2).returncode == 2
  assert len(nights.read_records(str(serving), MODEL)) == 1  # The stand-in records nothing.


@pytest.mark.timeout(300)
def test_a_night_that_finds_the_lock_held_is_recorded_and_notified_as_skipped(tmp_path, serving):
  out = tmp_path / "out"
  ran = tmp_path / "ran"
  stand_in = crontab_runs.executable(tmp_path / "run", f"#!/bin/sh\ntouch {ran}\n")
  with notify_servers.http_server() as hook, open(out / ".cron.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    proc = _night(out, stand_in, "--notify", f"json://127.0.0.1:{hook.server_address[1]}/n")
    assert proc.returncode == 75, proc.stderr
    assert not ran.exists()
    (record,) = nights.read_records(str(serving), MODEL)
    assert record["outcome"] == nights_lib.SKIPPED
    assert "previous night still holds" in record["line"]
    (posted,) = hook.requests
    assert "night skipped" in posted["json"]["title"]


@pytest.mark.timeout(300)
def test_a_run_killed_by_a_signal_is_recorded_and_notified_as_interrupted(tmp_path, serving):
  """As when the kernel's out-of-memory killer ends run_local.py: it can record nothing."""
  out = tmp_path / "out"
  killed = crontab_runs.executable(tmp_path / "killed", "#!/bin/sh\nkill -9 $$\n")
  with notify_servers.http_server() as hook:
    target = f"json://127.0.0.1:{hook.server_address[1]}/night"
    proc = _night(out, killed, "--notify", target)
    assert proc.returncode == 128 + signal.SIGKILL, proc.stderr
    (record,) = nights.read_records(str(serving), MODEL)
    assert record["outcome"] == nights_lib.INTERRUPTED, record
    assert "run_local.py was killed by SIGKILL" in record["line"], record
    assert record["owner"] == nights_lib.local_owner(str(out))
    assert record["seconds"] is not None and record["started"] <= record["ended"]
    (posted,) = hook.requests
    assert "night interrupted" in posted["json"]["title"]
  log = (out / "logs" / "nightly.log").read_text()
  assert record["night"] in log and "ended with exit status 137" in log


@pytest.mark.timeout(300)
def test_a_job_stopped_by_sigterm_stops_its_run_and_records_the_night(tmp_path, serving):
  out = tmp_path / "out"
  pid_file = tmp_path / "pid"
  hangs = crontab_runs.executable(
    tmp_path / "hangs", f"#!/bin/sh\necho $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}\n"
    "sleep 600\n",
  )  # fmt: skip
  command = crontab_runs.night_command(out, hangs)
  job = subprocess.Popen(command, env=project_env(), cwd=REPO_ROOT, stderr=subprocess.PIPE)
  deadline = time.monotonic() + 60
  while not pid_file.exists() and time.monotonic() < deadline and job.poll() is None:
    time.sleep(0.05)
  assert pid_file.exists(), job.communicate(timeout=10)[1]
  job.send_signal(signal.SIGTERM)
  assert job.wait(timeout=120) == 128 + signal.SIGTERM
  job.stderr.close()
  assert not _running(int(pid_file.read_text()))
  (record,) = nights.read_records(str(serving), MODEL)
  assert record["outcome"] == nights_lib.INTERRUPTED, record
  assert "received SIGTERM" in record["line"], record


def _install(out, crontab, *extra):
  from pipeline.cli import schedule

  args = ["local", "install", "--cron", "0 2 * * *", "--output-dir", str(out)]
  return schedule.main([*args, "--crontab-file", str(crontab), *extra])


@pytest.mark.timeout(300)
def test_run_now_runs_the_installed_line_as_cron_would(tmp_path, capsys):
  out, crontab = tmp_path / "out", tmp_path / "crontab"
  seen = tmp_path / "seen"
  fake_python = crontab_runs.executable(
    tmp_path / "python",
    f'#!/bin/sh\necho "$PATH|$GREETING|$(pwd)|$*" > {seen}\nexit 3\n',
  )
  crontab.write_text('GREETING="hello there"\n')
  assert _install(out, crontab, "--python", fake_python, "--", "--model-name", MODEL) == 0
  from pipeline.cli import schedule

  code = schedule.main(
    ["local", "run-now", "--output-dir", str(out), "--crontab-file", str(crontab)]
  )
  assert code == 3  # The night's own status.
  path, greeting, cwd, argv = seen.read_text().strip().split("|")
  assert (path, greeting, cwd) == ("/usr/bin:/bin", "hello there", str(REPO_ROOT))
  assert argv.startswith(f"pipeline/schedule.py local night --output-dir {out} --job-name ")
  assert argv.endswith("--time-limit 6h -- --model-name m")
  assert "The night ended with exit status 3" in capsys.readouterr().out


def _record(serving, night, started, outcome="pushed", owner=None):
  record = {"night": night, "started": started, "ended": started, "outcome": outcome}
  record.update(line=f"{outcome} line", owner=owner)
  nights.append_record(str(serving), MODEL, record)


@pytest.mark.timeout(300)
def test_installing_the_same_entry_again_keeps_the_missed_nights_missed(tmp_path, capsys):
  """A configuration tool that installs the entry every hour must not silence `status`."""
  from pipeline.cli import schedule

  out, crontab = tmp_path / "out", tmp_path / "crontab"
  (out / "serving" / MODEL).mkdir(parents=True)
  assert _install(out, crontab, "--", "--model-name", MODEL) == 0
  schedule_file = out / "schedule.json"
  facts = json.loads(schedule_file.read_text())
  three_days_ago = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=3)
  installed = three_days_ago.isoformat(timespec="seconds")
  schedule_file.write_text(json.dumps({**facts, "installed_at": installed}))
  assert _install(out, crontab, "--", "--model-name", MODEL) == 0
  assert "Already installed, unchanged" in capsys.readouterr().out
  assert json.loads(schedule_file.read_text())["installed_at"] == installed
  status = ["local", "status", "--output-dir", str(out), "--crontab-file", str(crontab)]
  assert schedule.main(status) == 1
  err = capsys.readouterr().err
  assert f"no night since the job was installed at {three_days_ago:%Y-%m-%d %H:%M UTC}" in err
  assert "the schedule '0 2 * * *' expected 3 nights, the last at " in err, err
  # Another schedule is a new install: counted from now.
  args = ["local", "install", "--cron", "0 3 * * *", "--output-dir", str(out)]
  assert schedule.main([*args, "--crontab-file", str(crontab), "--", "--model-name", MODEL]) == 0
  assert json.loads(schedule_file.read_text())["installed_at"] != installed


@pytest.mark.timeout(300)
def test_status_fails_after_a_missed_night_and_passes_after_a_good_one(tmp_path, capsys):
  from pipeline.cli import schedule

  out, crontab = tmp_path / "out", tmp_path / "crontab"
  serving = out / "serving"
  (serving / MODEL).mkdir(parents=True)
  assert _install(out, crontab, "--", "--model-name", MODEL) == 0
  # Installed long ago (its schedule file says so), last night three days back.
  schedule_file = out / "schedule.json"
  facts = json.loads(schedule_file.read_text())
  schedule_file.write_text(json.dumps({**facts, "installed_at": "2026-01-01T00:00:00+00:00"}))
  owner = nights_lib.local_owner(str(out))
  _record(serving, "old", "2026-01-02T02:00:00Z", owner=owner)
  status = ["local", "status", "--output-dir", str(out), "--crontab-file", str(crontab)]
  capsys.readouterr()
  assert schedule.main(status) == 1
  err = capsys.readouterr().err
  assert len(err.strip().splitlines()) == 1 and "no night since 2026-01-02 02:00 UTC" in err
  # A good night tonight (another output folder's night does not count for this job).
  from components.serving import layout

  _record(serving, "theirs", layout.utc_now(), owner="elsewhere:/out")
  assert schedule.main(status) == 1
  capsys.readouterr()
  _record(serving, "tonight", layout.utc_now(), owner=owner)
  assert schedule.main(status) == 0
  assert "last night" in capsys.readouterr().out
  # A rollback since (a version that copies version 1, live over the night's version 2).
  record = {"night": "pushed", "started": layout.utc_now(), "outcome": "pushed", "owner": owner}
  nights.append_record(
    str(serving), MODEL, {**record, "line": "pushed version 2", "live_version": 2}
  )
  for version, extra in ((1, {}), (2, {}), (3, {"rollback": {"from": 2, "to": 1}})):
    (serving / MODEL / str(version)).mkdir()
    (serving / MODEL / str(version) / "saved_model.pb").write_bytes(b"")
    manifest = {"version": version, **extra}
    (serving / MODEL / str(version) / "manifest.json").write_text(json.dumps(manifest))
  assert schedule.main(status) == 0
  assert "pushed version 2; live now: version 3, a rollback to version 1; next due" in (
    capsys.readouterr().out
  )
  # A night that left that version live: the clause is for a change since, so it goes.
  nights.append_record(
    str(serving), MODEL, {**record, "night": "kept", "line": "nothing new", "live_version": 3}
  )
  assert schedule.main(status) == 0
  kept = capsys.readouterr().out
  assert "nothing new; next due" in kept and "live now" not in kept, kept
  # A night's notes follow its outcome (they were dropped here, though history had them).
  note = "span-2/ holds no *.csv file (it holds data.csv.part); the newest span read is 1"
  record = {"night": "noted", "started": layout.utc_now(), "outcome": "not_pushed"}
  record.update(owner=owner, line="nothing new to push.", notes=[note])
  nights.append_record(str(serving), MODEL, record)
  assert schedule.main(status) == 0
  assert f"not_pushed: nothing new to push. (and {note}); live now" in capsys.readouterr().out
  # A failed night is on time but not well: non-zero, in one line, its period not doubled.
  _record(serving, "failed", layout.utc_now(), outcome="failed", owner=owner)
  nights.append_record(
    str(serving), MODEL, {**record, "night": "failed.", "outcome": "failed", "notes": []}
  )
  assert schedule.main(status) == 1
  err = capsys.readouterr().err
  assert "failed: nothing new to push; " in err and ".;" not in err
  # A night still open is running while its process lives, and not once that is gone.
  nights_lib.begin_night(str(serving), MODEL, "open", owner)
  assert schedule.main(status) == 0
  assert "running: still running" in capsys.readouterr().out
  dead = subprocess.Popen(["true"])
  dead.wait()
  opened = nights.open_facts(str(serving), MODEL, "open")[nights_lib.NIGHT_STEP]
  nights.record_facts(
    str(serving), MODEL, "open", nights_lib.NIGHT_STEP, {**opened, "pid": dead.pid}
  )
  assert schedule.main(status) == 1
  assert f"interrupted: its process ({dead.pid}) is gone" in capsys.readouterr().err


def test_one_job_name_for_two_output_folders_is_refused_not_replaced(tmp_path, capsys):
  """The second install under --job-name nightly replaced the first folder's job, silently."""
  crontab = tmp_path / "crontab"
  first, second = tmp_path / "a", tmp_path / "b"
  assert _install(first, crontab, "--job-name", "nightly") == 0
  before = crontab.read_text()
  capsys.readouterr()
  assert _install(second, crontab, "--job-name", "nightly") == 1
  err = capsys.readouterr().err.strip()
  assert "\n" not in err and f"already has a job 'nightly' for --output-dir {first};" in err
  assert crontab.read_text() == before
  assert _install(first, crontab, "--job-name", "nightly", "--time-limit", "2h") == 0  # Its own.
