"""The Pusher's executor and the rollback runner on an S3 serving folder (moto's server), and a
night's span notes listed from S3 data.

The same training pushed again pushes nothing; a new training is the next version; a rollback
re-publishes the previous version as a new one, all on the object store. The Pusher runs in a
subprocess: it reaches S3 through tensorflow-io (S3_ENDPOINT), which aborts an interpreter at
exit. The whole pipeline on S3 is `tests/e2e/test_object_store.py`'s one run.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.cli_runs import REPO_ROOT, moto_s3, run_python

BUCKET = "kit"
SERVING = f"s3://{BUCKET}/serving"

# Pushes three Model artifacts in turn (trainings "a", "a" again, "b"), each a tiny SavedModel
# with the project's serving signature and a training fingerprint, blessed; after each, prints
# one JSON line: the PushedModel's properties and what the model's serving folder then holds.
PUSHES = """
import json, os, sys

from components import tf_compat

tf_compat.register_filesystems([SERVING])
import tensorflow as tf
from tfx.dsl.components.base import base_executor
from tfx.types import standard_artifacts

from components.pusher import executor as pusher_executor
from components.pusher import spec as s
from core import properties
from tests.support import tiny_models


def push(n, training, bias):
  model = standard_artifacts.Model()
  model.uri = os.path.join(ROOT, f"model-{n}")
  model.id = 10 * n + 1
  tiny_models.write_saved_model(os.path.join(model.uri, "Format-Serving"), bias)
  model.set_string_custom_property(properties.TRAINING_FINGERPRINT_PROPERTY, training)
  blessing = standard_artifacts.ModelBlessing()
  blessing.uri = os.path.join(ROOT, f"blessing-{n}")
  os.makedirs(blessing.uri)
  open(os.path.join(blessing.uri, "BLESSED"), "w").close()
  blessing.id = 10 * n + 2
  blessing.set_int_custom_property(properties.BLESSED_PROPERTY, 1)
  pushed = standard_artifacts.PushedModel()
  pushed.uri = os.path.join(ROOT, f"pushed-{n}")
  context = base_executor.BaseExecutor.Context(
    tmp_dir=os.path.join(ROOT, "tmp"), unique_id=str(n), pipeline_run_id=f"run-{n}"
  )
  pusher_executor.Executor(context).Do(
    {s.MODEL_KEY: [model], s.MODEL_BLESSING_KEY: [blessing]},
    {s.PUSHED_MODEL_KEY: [pushed]},
    {
      properties.SERVING_DIR_KEY: SERVING,
      properties.MODEL_NAME_KEY: "digits",
      s.KEEP_VERSIONS_KEY: 5,
    },
  )
  names = (
    properties.PUSHED_PROPERTY,
    properties.PUSHED_VERSION_PROPERTY,
    properties.PUSHED_DESTINATION_PROPERTY,
    properties.PUSHED_REASON_PROPERTY,
  )
  got = {k: pushed.get_custom_property(k) for k in names if pushed.has_custom_property(k)}
  got["listing"] = sorted(tf.io.gfile.listdir(SERVING + "/digits"))
  print(json.dumps(got), flush=True)


for n, (training, bias) in enumerate((("a", 0.0), ("a", 0.0), ("b", 1.0)), start=1):
  push(n, training, bias)
sys.stdout.flush()
os._exit(0)  # tensorflow-io aborts the interpreter in its exit-time destructors.
"""


@pytest.fixture(scope="module")
def s3_server():
  with moto_s3(BUCKET) as (client, env):
    yield client, env


@pytest.mark.timeout(600)
def test_pushes_again_nothing_then_a_new_version_then_rolls_back_on_s3(s3_server, tmp_path):
  client, env = s3_server
  code = f"SERVING = {SERVING!r}\nROOT = {str(tmp_path)!r}\n" + PUSHES
  proc = run_python(code, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  first, again, new = (json.loads(line) for line in proc.stdout.splitlines()[-3:])
  assert first["pushed"] == 1 and first["pushed_destination"] == f"{SERVING}/digits/1", first
  # The same training again: nothing is pushed, and the folder holds version 1 and its history.
  assert again["pushed"] == 0, again
  assert "live version 1 was trained on the same data" in again["pushed_reason"], again
  assert first["listing"] == again["listing"] == [".history", "1"], (first, again)
  # A new training is version 2; a rollback on the object store re-publishes version 1 as 3.
  assert new["pushed"] == 1 and new["pushed_version"] == "2", new
  rollback = subprocess.run(
    [
      sys.executable,
      str(REPO_ROOT / "pipeline" / "rollback.py"),
      "--serving-dir",
      SERVING,
      "--model-name",
      "digits",
      "--previous",
    ],
    env=env,
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=300,
    check=False,
  )
  assert rollback.returncode == 0, rollback.stderr[-2000:]
  assert "version 1 is live again as version 3" in rollback.stdout
  restored = json.loads(
    client.get_object(Bucket=BUCKET, Key="serving/digits/3/manifest.json")["Body"].read()
  )
  assert restored["republished_from"]["version"] == 1 and restored["event"] == "rollback"


# The notes of a night on S3 data (Kubeflow's span resolver lists the data root in the cluster):
# span-3/ holds only a part file, span 2 was never read, and the newest span is old.
SPAN_NOTES = """
import datetime, json, os

from components import tf_compat

tf_compat.register_filesystems([DATA])
from components.nights import span_notes
from components.serving import nights

for started, spans in (("2026-12-01T02:00:00Z", [1]), ("2026-12-02T02:00:00Z", [4])):
  nights.append_record(SERVING, "m", {"night": started, "started": started, "spans": spans})
now = datetime.datetime(2026, 12, 5, 2, tzinfo=datetime.timezone.utc)
for pattern in ("span-{SPAN}/*.csv", "span-1/*.csv"):
  notes = span_notes.night_notes(DATA, pattern, SERVING, "m", 1, 86400, now)
  print(json.dumps(notes), flush=True)
os._exit(0)  # tensorflow-io aborts the interpreter in its exit-time destructors.
"""


@pytest.mark.timeout(600)
def test_span_notes_list_the_spans_of_data_on_s3(s3_server):
  client, env = s3_server
  for key in ("span-1/a.csv", "span-2/a.csv", "span-3/a.csv.part", "span-4/a.csv"):
    client.put_object(Bucket=BUCKET, Key=f"notes/data/{key}", Body=b"x\n1\n")
  data, serving = f"s3://{BUCKET}/notes/data", f"s3://{BUCKET}/notes/serving"
  proc = run_python(f"DATA = {data!r}\nSERVING = {serving!r}\n" + SPAN_NOTES, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  spans, plain = (json.loads(line) for line in proc.stdout.splitlines()[-2:])
  assert spans == [
    "span 2 has files that no night read: a night reads the newest 1 span(s) (--rolling-spans), "
    "so a span that came after a newer one, or with it, is never trained; pass --rolling-spans "
    "to read more",
    "no new data for 3.0 days: span 4 was first read 2026-12-02 02:00 UTC",
  ]
  # Without spans, the object's modification time: written just now, so fresh.
  assert plain == []
  client.delete_object(Bucket=BUCKET, Key="notes/data/span-4/a.csv")
  client.put_object(Bucket=BUCKET, Key="notes/data/span-4/readme.txt", Body=b"x")
  proc = run_python(f"DATA = {data!r}\nSERVING = {serving + '2'!r}\n" + SPAN_NOTES, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  spans = json.loads(proc.stdout.splitlines()[-2])
  assert spans[:2] == [
    "span-3/ holds no *.csv file (it holds a.csv.part); the newest span read is 2",
    "span-4/ holds no *.csv file (it holds readme.txt); the newest span read is 2",
  ]
