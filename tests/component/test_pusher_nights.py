"""The Pusher's part of a night's record, and its one-line refusal of a serving folder it cannot
write: its executor's Do on a tiny SavedModel, a hand-written ModelEvaluation and a temp folder."""

import os
import pathlib
import subprocess

import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.proto import validation_result_pb2
from tfx.dsl.components.base import base_executor
from tfx.types import standard_artifacts

from components.nights import nights_lib
from components.pusher import executor as pusher_executor
from components.pusher import spec as s
from components.serving import nights, paths, publish, versions
from core import properties
from pipeline.cli import reporting
from tests.support import tiny_models

MODEL = "digits"


def _artifact(kind, uri: pathlib.Path, artifact_id: int):
  artifact = kind()
  artifact.uri = str(uri)
  artifact.id = artifact_id
  os.makedirs(uri, exist_ok=True)
  return artifact


def _inputs(tmp_path: pathlib.Path, blessed: int, evaluation: bool = True) -> dict:
  model = _artifact(standard_artifacts.Model, tmp_path / "model", 67)
  tiny_models.write_saved_model(tmp_path / "model" / "Format-Serving", 1.0)
  blessing = _artifact(standard_artifacts.ModelBlessing, tmp_path / "blessing", 68)
  blessing.set_int_custom_property(properties.BLESSED_PROPERTY, blessed)
  blessing.set_int_custom_property("current_model_id", 67)
  blessing.set_int_custom_property("baseline_model_id", 62)
  (tmp_path / "blessing" / ("BLESSED" if blessed else "NOT_BLESSED")).write_text("")
  inputs = {s.MODEL_KEY: [model], s.MODEL_BLESSING_KEY: [blessing]}
  if evaluation:
    inputs[s.EVALUATION_KEY] = [_evaluation(tmp_path / "evaluation", ok=bool(blessed))]
  return inputs


def _evaluation(folder: pathlib.Path, ok: bool):
  """A ModelEvaluation whose validation result says accuracy dropped beyond its change bound."""
  result = validation_result_pb2.ValidationResult(validation_ok=ok)
  if not ok:
    failure = result.metric_validations_per_slice.add().failures.add()
    failure.metric_key.name = "binary_accuracy"
    failure.metric_key.is_diff = True
    failure.metric_value.double_value.value = -0.0312
    failure.metric_threshold.change_threshold.CopyFrom(
      tfma.GenericChangeThreshold(
        direction=tfma.MetricDirection.HIGHER_IS_BETTER, absolute={"value": -0.01}
      )
    )
  evaluation = _artifact(standard_artifacts.ModelEvaluation, folder, 69)
  with tf.io.TFRecordWriter(str(folder / "validations.tfrecord")) as writer:
    writer.write(result.SerializeToString())
  return evaluation


def _do(tmp_path: pathlib.Path, inputs: dict, serving: pathlib.Path):
  pushed = _artifact(standard_artifacts.PushedModel, tmp_path / "pushed", 70)
  context = base_executor.BaseExecutor.Context(
    tmp_dir=str(tmp_path / "tmp"), unique_id="1", pipeline_run_id="run-1"
  )
  pusher_executor.Executor(context).Do(
    inputs,
    {s.PUSHED_MODEL_KEY: [pushed]},
    {
      properties.SERVING_DIR_KEY: str(serving),
      properties.MODEL_NAME_KEY: MODEL,
      properties.NIGHT_ID_KEY: "night-1",
      s.KEEP_VERSIONS_KEY: 5,
    },
  )
  return pushed


def _live_version_1(tmp_path: pathlib.Path) -> pathlib.Path:
  serving = tmp_path / "serving"
  source = tiny_models.write_saved_model(tmp_path / "live_model", 0.0)
  assert publish.push_version(str(serving), MODEL, source).version == 1
  return serving


def test_a_model_not_blessed_says_the_metric_its_change_and_the_threshold(tmp_path):
  serving = _live_version_1(tmp_path)
  pushed = _do(tmp_path, _inputs(tmp_path, blessed=0), serving)
  reason = pushed.get_string_custom_property(properties.PUSHED_REASON_PROPERTY)
  assert reason == (
    "model not blessed by Evaluator: binary_accuracy changed by -0.0312 against the last "
    "blessed model, beyond the change threshold (absolute -0.01; higher is better)"
  )
  # The night's record: not pushed, in those words, with the version still live.
  facts = nights.open_facts(str(serving), MODEL, "night-1")[nights_lib.PUSHER_STEP]
  assert (facts["pushed"], facts["version"], facts["live_version"]) == (False, None, 1)
  assert facts["reason"] == reason and facts["blessed"] is False


def test_without_the_evaluation_the_blessing_still_explains_itself(tmp_path):
  serving = _live_version_1(tmp_path)
  pushed = _do(tmp_path, _inputs(tmp_path, blessed=0, evaluation=False), serving)
  reason = pushed.get_string_custom_property(properties.PUSHED_REASON_PROPERTY)
  assert reason == (
    "model not blessed by Evaluator: blessed=0; current_model_id=67; baseline_model_id=62"
  )


def test_a_night_that_pushed_records_the_new_live_version_and_a_first_night_none(tmp_path):
  serving = tmp_path / "serving"
  pushed = _do(tmp_path, _inputs(tmp_path, blessed=0), serving)  # Nothing live yet.
  facts = nights.open_facts(str(serving), MODEL, "night-1")[nights_lib.PUSHER_STEP]
  assert facts["live_version"] is None
  serving = _live_version_1(tmp_path)
  pushed = _do(tmp_path, _inputs(tmp_path, blessed=1), serving)
  assert pushed.get_string_custom_property(properties.PUSHED_VERSION_PROPERTY) == "2"
  facts = nights.open_facts(str(serving), MODEL, "night-1")[nights_lib.PUSHER_STEP]
  assert (facts["pushed"], facts["version"], facts["live_version"]) == (True, 2, 2)


def test_a_version_pushed_beside_this_run_is_not_replaced_by_a_model_never_compared_with_it(
  tmp_path, monkeypatch
):
  """Two runs on one serving folder: both compared their models with version 1, the other
  pushed version 2 first, and this one's blessing says what it was compared with."""
  compared = {"candidate": {"accuracy": 0.789}, "baseline": {"accuracy": 0.804}}
  compared["diff_vs_baseline"] = {"accuracy": -0.015}
  monkeypatch.setattr(
    pusher_executor.evaluation_metrics, "read_overall_metrics", lambda uri: dict(compared)
  )
  serving = _live_version_1(tmp_path)
  inputs = _inputs(tmp_path, blessed=1)
  blessing = inputs[s.MODEL_BLESSING_KEY][0]
  blessing.set_int_custom_property(properties.EVALUATED_WHILE_LIVE_PROPERTY, 1)
  beside = tiny_models.write_saved_model(tmp_path / "beside", 2.0)
  assert publish.push_version(str(serving), MODEL, beside).version == 2
  pushed = _do(tmp_path, inputs, serving)
  assert not pushed.get_int_custom_property(properties.PUSHED_PROPERTY)
  reason = pushed.get_string_custom_property(properties.PUSHED_REASON_PROPERTY)
  assert reason.startswith("version 2 went live during this run"), reason
  facts = nights.open_facts(str(serving), MODEL, "night-1")[nights_lib.PUSHER_STEP]
  assert (facts["pushed"], facts["live_version"], facts["reason"]) == (False, 2, reason)
  # The night's record keeps the model's metrics, not a comparison with a version not live.
  assert facts["metrics"] == {**compared, "baseline": {}, "diff_vs_baseline": {}}
  # Compared with the version live now: pushed.
  blessing.set_int_custom_property(properties.EVALUATED_WHILE_LIVE_PROPERTY, 2)
  assert (
    _do(tmp_path, inputs, serving).get_string_custom_property(properties.PUSHED_VERSION_PROPERTY)
    == "3"
  )


def _assert_one_line_refusal(raised, folder: pathlib.Path, why: str) -> None:
  assert isinstance(raised.value, paths.PusherError)
  line = reporting.user_error_message(raised.value)
  assert line == str(raised.value) and "\n" not in line
  assert line.startswith(f"the model folder {folder} cannot be written (")
  assert why in line
  assert line.endswith(
    "run the pipeline as a user who can write that folder, or remount it read-write."
  )


def test_tensorflows_permission_denied_is_one_line_naming_the_model_folder(tmp_path, monkeypatch):
  serving = tmp_path / "serving"
  folder = serving / MODEL

  def refuse(*args, **kwargs):
    del args, kwargs
    raise tf.errors.PermissionDeniedError(
      None, None, f"{folder}/.stage-1/saved_model.pb; Read-only file system"
    )

  monkeypatch.setattr(publish, "push_version", refuse)
  with pytest.raises(paths.PusherError) as raised:
    _do(tmp_path, _inputs(tmp_path, blessed=1), serving)
  _assert_one_line_refusal(raised, folder, "saved_model.pb; Read-only file system")


def test_a_permission_error_outside_the_serving_folder_keeps_its_traceback(tmp_path, monkeypatch):
  def refuse(*args, **kwargs):
    del args, kwargs
    raise tf.errors.PermissionDeniedError(None, None, "/elsewhere/model.pb; Permission denied")

  monkeypatch.setattr(publish, "push_version", refuse)
  with pytest.raises(tf.errors.PermissionDeniedError):
    _do(tmp_path, _inputs(tmp_path, blessed=1), tmp_path / "serving")


@pytest.fixture
def read_only_model_folder(tmp_path):
  """<serving>/digits holding version 1, remounted read-only (needs root to mount)."""
  serving = tmp_path / "serving"
  folder = serving / MODEL
  folder.mkdir(parents=True)
  mounted = subprocess.run(
    ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)],
    capture_output=True,
    check=False,
  )
  if mounted.returncode != 0:
    pytest.skip("a tmpfs cannot be mounted here (needs root)")
  try:
    _live_version_1(tmp_path)
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    yield folder
  finally:
    subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_read_only_model_folder_is_one_line_and_nothing_changes(tmp_path, read_only_model_folder):
  serving = read_only_model_folder.parent
  with pytest.raises(paths.PusherError) as raised:
    _do(tmp_path, _inputs(tmp_path, blessed=1), serving)
  _assert_one_line_refusal(raised, read_only_model_folder, "Read-only file system")
  assert versions.list_versions(str(serving), MODEL) == [1]
