"""The nightly job as cron runs it: a night past its limit, a night that finds the lock held, a
missing night, and `run-now` running the installed line with cron's environment.

run_local.py is stood in for by a shell script given as `--python` (it hangs, or exits with a
chosen status) where the test is about the job around it; the nights are recorded in a real
serving folder and notified to a loopback webhook.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys

import pytest

from components.nights import nights_lib
from components.serving import nights
from tests.support import crontab_runs, notify_servers
from tests.support.cli_runs import REPO_ROOT, moto_s3, project_env

MODEL = "m"


def _night(out, python, *run_local_args, limit="6h", timeout=120, env=None):
  command = [sys.executable, str(REPO_ROOT / "pipeline" / "schedule.py"), "local", "night"]
  command += ["--output-dir", str(out), "--job-name", "j", "--time-limit", limit]
  command += ["--python", str(python), "--", "--model-name", MODEL, *run_local_args]
  return subprocess.run(
    command,
    env=env or project_env(),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
    check=False,
  )


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
    assert "night timed_out" in posted["json"]["title"]
  with pytest.raises(ProcessLookupError):  # The whole group was stopped, its child too.
    os.kill(int(pids.read_text()), 0)
  log = (out / "logs" / "nightly.log").read_text()
  assert "==== night " in log and "ended with exit status 124" in log
  # The lock went with the job: the next night runs (and exits with its run's own status).
  exits_2 = crontab_runs.executable(tmp_path / "exits-2", "#!/bin/sh\nexit 2\n")
  assert _night(out, exits_2).returncode == 2
  assert len(nights.read_records(str(serving), MODEL)) == 1  # The stand-in records nothing.


@pytest.mark.timeout(900)
def test_a_real_night_whose_module_sleeps_is_stopped_at_its_limit(tmp_path):
  """run_local.py itself, on the digits, with a trainer module that never returns: stopped at
  the limit with every process of its group (Beam's, TensorFlow's), recorded with the facts the
  data gate had recorded before the trainer started.

  The limit has to fall after the data gate. The trainer is reached in about 25 s here, so the
  night first gets 60 s; where the module was not reached by then (a slower or busier machine),
  that night is checked as far as it went and the test runs one more with 150 s.
  """
  reached = tmp_path / "reached"
  sleepy = tmp_path / "sleepy.py"
  sleepy.write_text(
    f"def run_fn(fn_args):\n  import pathlib, time\n\n"
    f"  pathlib.Path({str(reached)!r}).touch()\n  time.sleep(3600)\n"
  )
  for attempt, (limit, said) in enumerate(((60, "1 min"), (150, "150 s"))):
    out = tmp_path / f"out-{attempt}"
    proc = _night(
      out, sys.executable, "--module-file", str(sleepy), "--quiet", limit=f"{limit}s", timeout=450
    )
    assert proc.returncode == 124, proc.stderr[-2000:]
    (record,) = nights.read_records(str(out / "serving"), MODEL)
    assert record["outcome"] == nights_lib.TIMED_OUT, record
    assert f"ran past its limit of {said}" in record["line"], record
    left = subprocess.run(["pgrep", "-f", str(sleepy)], capture_output=True, text=True, check=False)
    assert left.stdout == "", left.stdout
    if reached.exists():
      break
  assert reached.exists(), "the trainer was not reached within 150 s"
  assert record["rows"]["train"] > 0, record
  assert record["owner"] == nights_lib.local_owner(str(out))


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
def test_a_skipped_night_is_recorded_on_an_object_store_serving_folder(tmp_path):
  """The job records it through tensorflow-io, and still exits with the night's status."""
  out = tmp_path / "out"
  out.mkdir()
  stand_in = crontab_runs.executable(tmp_path / "run", "#!/bin/sh\nexit 0\n")
  with moto_s3("kit") as (client, env), open(out / ".cron.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    proc = _night(out, stand_in, "--serving-dir", "s3://kit/serving", env=env)
    assert proc.returncode == 75, proc.stderr[-2000:]
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="kit")["Contents"]]
    (key,) = [k for k in keys if k.startswith(f"serving/{MODEL}/.nights/")]
    record = json.loads(client.get_object(Bucket="kit", Key=key)["Body"].read())
  assert record["outcome"] == nights_lib.SKIPPED


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
  # A failed night is on time but not well: non-zero, in one line.
  _record(serving, "failed", layout.utc_now(), outcome="failed", owner=owner)
  assert schedule.main(status) == 1
  assert "failed line" in capsys.readouterr().err
