"""Nightly retraining end to end: new spans, warm start, blessing, a rejected night, a rerun."""

import csv
import json

import numpy as np
import pytest

from components.serving import history, live, versions
from tests.support.cli_runs import load_summary, run_script, states

pytestmark = pytest.mark.e2e

# Every night runs the same command, as a cron entry would. The newest span only
# (--rolling-spans 1, the default): each night trains and evaluates on the span that arrived.
NIGHTLY_FLAGS = (
  "--warm-start",
  "--model-name", "digits",
  "--train-steps", "100",
  "--min-accuracy", "0.5",
  # Night 1's span is small: about 30 eval rows.
  "--min-eval-examples", "20",
  "--max-accuracy-drop", "0.01",
  "--optimizer-variants", "none",
  "--tensorrt", "off",
  "--quiet",
)  # fmt: skip
# Night 1 gets a small span (blessed, but about 0.85 on its eval rows), night 2 a large one
# (about 0.95, well above night 1's model on the same rows), night 3 the rest with its labels
# shuffled (about 0.1, far below the 0.5 floor).
SPAN_ROWS = {1: 150, 2: 900}
# A rerun without new data reads the same Examples and the same serving folder: every
# component but the Pusher is served from the cache (LiveModel is cached by what is live, and
# version 2 was pushed by the run whose LiveModel it reuses); the Pusher runs and finds its
# candidate already live.
CACHED_ON_RERUN = (
  "CsvExampleGen",
  "StatisticsGen",
  "SchemaGen",
  "ExampleValidator",
  "LiveModel",
  "DistributedTrainer",
  "Evaluator",
  "Optimizer",
)


def _write_spans(digits_csv, data_root):
  """Returns a function that writes span-N/data.csv from disjoint slices of the digits rows."""
  with open(digits_csv, newline="") as f:
    rows = list(csv.reader(f))
  header, body = rows[0], rows[1:]
  order = np.random.default_rng(0).permutation(len(body))
  bounds = {1: (0, SPAN_ROWS[1]), 2: (SPAN_ROWS[1], SPAN_ROWS[1] + SPAN_ROWS[2])}
  bounds[3] = (bounds[2][1], len(body))

  def write(span, shuffle_labels=False):
    start, end = bounds[span]
    picked = [list(body[i]) for i in order[start:end]]
    if shuffle_labels:
      labels = [r[-1] for r in picked]
      for r, j in zip(picked, np.random.default_rng(1).permutation(len(labels)), strict=True):
        r[-1] = labels[j]
    folder = data_root / f"span-{span}"
    folder.mkdir(parents=True)
    with open(folder / "data.csv", "w", newline="") as f:
      csv.writer(f).writerows([header, *picked])

  return write


def _night(data_root, out):
  proc = run_script(
    "run_local.py",
    "--data-root",
    data_root,
    "--output-dir",
    out,
    *NIGHTLY_FLAGS,
    timeout=600,
    warm=True,
  )
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  summary = load_summary(out)
  assert summary["status"] == "succeeded"
  return summary, proc.stdout


def _warm_start_bases(metadata_path):
  """What each DistributedTrainer execution that trained got as base_model, oldest first: the
  live version it warm-started from, or None when LiveModel marked the base unavailable."""
  from ml_metadata import metadata_store
  from ml_metadata.proto import metadata_store_pb2

  config = metadata_store_pb2.ConnectionConfig()
  config.sqlite.filename_uri = str(metadata_path)
  config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
  store = metadata_store.MetadataStore(config)
  node = store.get_context_by_type_and_name("node", "digits.DistributedTrainer")
  bases = []
  for execution in sorted(store.get_executions_by_context(node.id), key=lambda e: e.id):
    if execution.last_known_state != metadata_store_pb2.Execution.COMPLETE:
      continue  # a cached execution trained nothing
    ids = [
      e.artifact_id
      for e in store.get_events_by_execution_ids([execution.id])
      if e.path.steps and e.path.steps[0].key == "base_model"
    ]
    [base] = store.get_artifacts_by_id(ids)
    props = base.custom_properties
    available = props["available"].int_value if "available" in props else 1
    bases.append(props["live_version"].int_value if available else None)
  return bases


@pytest.mark.timeout(1500)
def test_three_nights_push_improvements_reject_bad_labels_and_skip_reruns(tmp_path, digits_csv):
  data_root, out = tmp_path / "data", tmp_path / "out"
  serving = str(out / "serving")
  write_span = _write_spans(digits_csv, data_root)

  # Night 1: the first span; no baseline yet, so the accuracy floor alone decides.
  write_span(1)
  night1, _ = _night(data_root, out)
  assert set(states(night1).values()) == {"ran"}
  assert night1["blessed"] is True and night1["validation"]["ok"] is True
  assert night1["eval_metrics"]["sparse_categorical_accuracy"] >= 0.5
  assert "sparse_categorical_accuracy_diff_vs_baseline" not in night1["eval_metrics"]
  assert night1["pushed"]["pushed"] is True and night1["pushed"]["version"] == 1

  # Night 2: a larger span; warm-started from version 1 and clearly better than it.
  write_span(2)
  night2, _ = _night(data_root, out)
  assert states(night2)["CsvExampleGen"] == "ran" and night2["new_data"] is True
  assert night2["blessed"] is True
  assert night2["eval_metrics"]["sparse_categorical_accuracy_diff_vs_baseline"] >= 0.05
  assert night2["pushed"]["pushed"] is True and night2["pushed"]["version"] == 2
  assert live.live_version(serving, "digits").version == 2

  # Night 2 again, no new data: the data components are cached and nothing is pushed, since
  # the live version was trained on the same data with the same module and settings.
  rerun, rerun_stdout = _night(data_root, out)
  rerun_states = states(rerun)
  assert {name: rerun_states[name] for name in CACHED_ON_RERUN} == dict.fromkeys(
    CACHED_ON_RERUN, "cached"
  )
  assert rerun["new_data"] is False and "no new data" in rerun_stdout
  assert rerun["pushed"]["pushed"] is False
  assert rerun_states["Pusher"] == "ran"
  assert "live version 2 was trained on the same data" in rerun["pushed"]["reason"]
  assert versions.list_versions(serving, "digits") == [1, 2]
  assert live.live_version(serving, "digits").version == 2

  # Night 3: shuffled labels. Trained and evaluated, not blessed, not pushed; 2 stays live.
  write_span(3, shuffle_labels=True)
  night3, night3_stdout = _night(data_root, out)
  assert states(night3)["DistributedTrainer"] == "ran"
  assert night3["blessed"] is False
  assert night3["eval_metrics"]["sparse_categorical_accuracy"] < 0.3
  assert night3["pushed"]["pushed"] is False
  reason = night3["pushed"]["reason"]
  assert reason.startswith("the Evaluator did not bless the model: ")
  assert (
    "sparse_categorical_accuracy = " in reason and "value threshold (lower bound 0.5)" in reason
  )
  assert "model not blessed by Evaluator" in night3["pushed"]["pusher_reason"]
  assert night3["validation"]["ok"] is False
  assert "not pushed: the Evaluator did not bless the model" in night3_stdout
  assert versions.list_versions(serving, "digits") == [1, 2]
  assert live.live_version(serving, "digits").version == 2
  entries = history.read_history(serving, "digits")
  assert [(h["event"], h.get("version")) for h in entries] == [("push", 1), ("push", 2)]

  # What each served version was trained on, and what each night warm-started from.
  manifests = [
    json.loads((out / "serving" / "digits" / str(v) / "manifest.json").read_text()) for v in (1, 2)
  ]
  assert [m["data_spans"] for m in manifests] == [[1], [2]]
  # Night 1 had nothing to start from, night 2 started from version 1, the rerun trained
  # nothing (cached), night 3 started from version 2.
  assert _warm_start_bases(out / "metadata.sqlite") == [None, 1, 2]
