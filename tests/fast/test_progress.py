"""The run summary as the terminal shows it (pipeline/cli/progress.py)."""

import io
import pathlib

import pytest
from rich.console import Console

from pipeline.cli import progress

TENSORRT = "tensorrt Python package not installed: pip install .[tensorrt]"


def _rendered(renderable, width: int) -> str:
  console = Console(width=width, record=True, file=io.StringIO())
  console.print(renderable)
  return console.export_text()


@pytest.mark.parametrize("width", [60, 80, 120])
def test_a_variant_skip_reason_is_shown_in_whole_words(width):
  long_reason = "onnxruntime could not load the model: " + "an unknown op type in the graph; " * 8
  variants = [
    {"name": "tensorrt_fp16", "status": "skipped", "reason": TENSORRT},
    {"name": "tflite", "status": "ok", "metric_value": 0.98, "size_bytes": 20_000},
    {"name": "onnx", "status": "failed", "reason": long_reason},
  ]
  text = _rendered(progress.variant_table(variants), width)
  words = " ".join(text.split())
  assert f"tensorrt_fp16 skipped: {TENSORRT}" in words  # brackets kept: not rich markup
  onnx = words[words.index("onnx failed: ") :]
  shown = onnx[len("onnx failed: ") : onnx.index(" …")]
  assert long_reason.startswith(shown + " ")  # cut after a whole word
  assert len(shown) <= 160
  assert words.count("…") == 1  # the cut reason's; rich cut no word or name short


def test_the_summary_says_when_early_stopping_left_the_profile_range_unreached():
  skipped = (
    "--profile-steps 2000,2010 was never reached: early stopping ended training at step 1617 "
    "(epoch 77 of 200); pass a range between 1 and 1617 to profile this run."
  )
  summary = {"status": "succeeded", "seconds": 1.0, "profile_skipped": skipped}
  lines = progress.describe_summary(summary, pathlib.Path("/out"), "/out/logs/run.log")
  assert f"no profile: {skipped}" in lines
  assert not any(
    line.startswith("no profile")
    for line in progress.describe_summary(
      {"status": "succeeded", "seconds": 1.0}, pathlib.Path("/out"), "log"
    )
  )


def test_the_summary_says_how_the_model_read_its_columns():
  from components import model_contract
  from core import column_types
  from models.tabular import profile, text_columns

  def stats(name, dtype, **kw):
    return profile.ColumnStats(model_contract.Column(name, dtype), 10, 0, **kw)

  text, num = column_types.STORED_STRING, column_types.STORED_FLOAT32
  columns = [
    stats("amount", num),
    stats("rate", num),
    stats("state", text, vocabulary=("CA", "TX", "NY")),
    stats("emp_title", text, vocabulary=("nurse", "manager"), free_text=True),
    stats("issued", text, date=text_columns.DateStats(0.0, 1.0, False, edges=(-1.0, 0.0, 1.0))),
  ]
  inputs = profile.describe_inputs(columns)
  assert inputs == (
    "2 numbers; text: state (3 values); free text as words: emp_title (2 words); "
    "dates: issued (2 bins)"
  )
  many = [stats(f"c{i}", text, vocabulary=("a",)) for i in range(6)]
  assert profile.describe_inputs(many) == (
    "text: c0 (1 value), c1 (1 value), c2 (1 value), c3 (1 value), and 2 more"
  )
  summary = {"status": "succeeded", "training_plan": {"reason": "up to 3 epochs", "inputs": inputs}}
  lines = progress.describe_summary(summary, pathlib.Path("/out"), "log")
  assert f"inputs: {inputs}" in lines
  assert lines.index(f"inputs: {inputs}") < lines.index("training: up to 3 epochs")


def test_the_summary_says_which_reading_of_a_count_won_with_both_errors():
  from core import tasks

  kept = tasks.Readings(classes_rmse=0.561, quantity_rmse=0.487, rows=300)
  plan = {"reason": "up to 3 epochs", "readings": {**kept.to_json(), "reason": kept.describe()}}
  lines = progress.describe_summary(
    {"status": "succeeded", "training_plan": plan}, pathlib.Path("/out"), "log"
  )
  assert lines[lines.index("training: up to 3 epochs") + 1] == (
    "label: read as a quantity: held-out RMSE 0.561 as classes against 0.487 as a quantity on "
    "300 rows, 13.2% lower (--task multiclass or --task regression sets one)"
  )


def test_a_count_meant_for_both_readings_without_held_out_rows_says_it_trained_classes_only():
  # StrikeNb (108 rows): the task line said both readings were trained, and only the classes
  # were (no rows held out to choose between them); nothing said so.
  plan = {"reason": "up to 200 epochs (no early stopping)", "holdout_rows": 0}
  summary = {"status": "succeeded", "training_plan": plan, "config": {"count_readings": True}}
  lines = progress.describe_summary(summary, pathlib.Path("/out"), "log")
  assert lines[lines.index("training: up to 200 epochs (no early stopping)") + 1] == (
    "label: trained as classes only: no rows were held out to compare the two readings on (too "
    "few training rows); --task regression reads a quantity"
  )
  summary["config"]["count_readings"] = False
  lines = progress.describe_summary(summary, pathlib.Path("/out"), "log")
  assert not [line for line in lines if line.startswith("label:")]


def test_the_summary_says_what_a_warm_start_copied():
  note = "0 of 5 layers with weights copied from the base model; its hidden layers ..."
  plan = {"reason": "up to 3 epochs", "epochs_run": 3, "warm_start": note}
  lines = progress.describe_summary(
    {"status": "succeeded", "training_plan": plan}, pathlib.Path("/out"), "log"
  )
  assert lines.index("training: up to 3 epochs; ran 3 epochs") + 1 == lines.index(
    f"warm start: {note}"
  )
  plan.pop("warm_start")
  lines = progress.describe_summary(
    {"status": "succeeded", "training_plan": plan}, pathlib.Path("/out"), "log"
  )
  assert not any(line.startswith("warm start") for line in lines)


def test_the_summary_says_why_the_label_reads_as_its_task():
  config = {"label_key": "momrace", "task": "regression", "floor_reason": "no ceiling"}
  summary = {"status": "succeeded", "config": config}
  lines = progress.describe_summary(summary, pathlib.Path("/out"), "log")
  assert "task: regression on label 'momrace'; floor: no ceiling" in lines
  config["task_reason"] = "numbers with a decimal point"
  lines = progress.describe_summary(summary, pathlib.Path("/out"), "log")
  assert (
    "task: regression on label 'momrace' (numbers with a decimal point); floor: no ceiling" in lines
  )
