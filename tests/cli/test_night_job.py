"""The nightly job as cron runs it, where it needs TensorFlow: a real run_local.py night stopped
at its limit, and a skipped night recorded on an object store's serving folder (through
tensorflow-io). The job around a stand-in run, on a local folder, is in
tests/fast/test_night_job.py.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys

import pytest

from components.nights import nights_lib
from components.serving import nights
from tests.support import crontab_runs
from tests.support.cli_runs import moto_s3
from tests.support.crontab_runs import night as _night

MODEL = crontab_runs.NIGHT_MODEL


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
