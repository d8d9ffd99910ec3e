"""Nightly retraining pieces without a pipeline run: the warm-start resolver, blessing reasons."""

import os

import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tensorflow_model_analysis.proto import validation_result_pb2
from tfx.types import standard_artifacts

from pipeline import summary
from pipeline.factory import (
  LatestBlessedModelFromEarlierDataStrategy,
  LatestBlessedModelOtherThanCandidateStrategy,
)


class _Store:
  """A real in-memory ML Metadata store with helpers to record artifacts and trainings."""

  def __init__(self):
    config = metadata_store_pb2.ConnectionConfig()
    config.fake_database.SetInParent()
    self.store = metadata_store.MetadataStore(config)
    self._trainer_type = self.store.put_execution_type(
      metadata_store_pb2.ExecutionType(name="Trainer")
    )

  def artifact(self, cls, **int_properties):
    artifact = cls()
    artifact.type_id = self.store.put_artifact_type(artifact.artifact_type)
    artifact.uri = f"/artifacts/{cls.TYPE_NAME}"
    for key, value in int_properties.items():
      artifact.set_int_custom_property(key, value)
    [artifact.id] = self.store.put_artifacts([artifact.mlmd_artifact])
    return artifact

  def trained(self, examples):
    """Records a training run on `examples` and returns the Model it produced."""
    model = self.artifact(standard_artifacts.Model)
    execution = metadata_store_pb2.Execution(type_id=self._trainer_type)
    event = metadata_store_pb2.Event
    self.store.put_execution(
      execution,
      [
        (examples.mlmd_artifact, event(type=event.INPUT)),
        (model.mlmd_artifact, event(type=event.OUTPUT)),
      ],
      [],
    )
    return model

  def blessing(self, model, blessed):
    return self.artifact(
      standard_artifacts.ModelBlessing, current_model_id=model.id, blessed=int(blessed)
    )


def _resolve(store, models, blessings, examples):
  return LatestBlessedModelFromEarlierDataStrategy().resolve_artifacts(
    store.store, {"model": models, "model_blessing": blessings, "examples": [examples]}
  )


def test_warm_start_base_is_latest_blessed_model_trained_on_other_examples():
  s = _Store()
  e1, e2, e3 = (s.artifact(standard_artifacts.Examples) for _ in range(3))
  m1, m2, m3 = s.trained(e1), s.trained(e2), s.trained(e3)
  b1, b2, b3 = s.blessing(m1, True), s.blessing(m2, True), s.blessing(m3, False)
  models, blessings = [m1, m2, m3], [b1, b2, b3]

  # New data (e3's model is not blessed): start from the newest blessed model, m2.
  new_data = _resolve(s, models, blessings, s.artifact(standard_artifacts.Examples))
  assert [a.id for a in new_data["model"]] == [m2.id]
  assert [a.id for a in new_data["model_blessing"]] == [b2.id]
  # Rerun on e2, whose model m2 is now the latest blessed: keep the base that run had, m1.
  rerun = _resolve(s, models, blessings, e2)
  assert [a.id for a in rerun["model"]] == [m1.id]
  # Rerun on e3 (m3 not blessed): m2 still.
  assert [a.id for a in _resolve(s, models, blessings, e3)["model"]] == [m2.id]


def test_warm_start_base_is_empty_when_only_models_of_this_data_are_blessed():
  s = _Store()
  e1 = s.artifact(standard_artifacts.Examples)
  m1 = s.trained(e1)
  result = _resolve(s, [m1], [s.blessing(m1, True)], e1)
  assert result["model"] == [] and result["model_blessing"] == []
  assert _resolve(s, [], [], e1)["model"] == []


def test_evaluator_baseline_is_latest_blessed_model_other_than_the_candidate():
  s = _Store()
  e1 = s.artifact(standard_artifacts.Examples)
  m1, m2, m3 = s.trained(e1), s.trained(e1), s.trained(e1)
  b1, b2, b3 = s.blessing(m1, True), s.blessing(m2, True), s.blessing(m3, False)

  def baseline(candidate):
    out = LatestBlessedModelOtherThanCandidateStrategy().resolve_artifacts(
      s.store, {"model": [m1, m2, m3], "model_blessing": [b1, b2, b3], "candidate": [candidate]}
    )
    assert out["candidate"] == [candidate]
    return [a.id for a in out["model"]], [a.id for a in out["model_blessing"]]

  # A new candidate on the same data is still judged against the live model (m2)...
  assert baseline(m3) == ([m2.id], [b2.id])
  # ...and a cached rerun of m2 gets the baseline m2 had when it was first evaluated.
  assert baseline(m2) == ([m1.id], [b1.id])
  assert baseline(m1) == ([m2.id], [b2.id])


def _failure(name, value, threshold, is_diff=False):
  failure = validation_result_pb2.ValidationFailure()
  failure.metric_key.name = name
  failure.metric_key.is_diff = is_diff
  failure.metric_threshold.CopyFrom(threshold)
  failure.metric_value.double_value.value = value
  return failure


def _write_validation(folder, result):
  os.makedirs(folder, exist_ok=True)
  with tf.io.TFRecordWriter(os.path.join(folder, "validations.tfrecord")) as w:
    w.write(result.SerializeToString())


def test_validation_failures_name_metric_value_and_threshold(tmp_path):
  floor = tfma.MetricThreshold(
    value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.9})
  )
  drop = tfma.MetricThreshold(
    change_threshold=tfma.GenericChangeThreshold(
      direction=tfma.MetricDirection.LOWER_IS_BETTER, absolute={"value": 0.1}
    )
  )
  result = validation_result_pb2.ValidationResult(validation_ok=False)
  per_slice = result.metric_validations_per_slice.add()
  per_slice.failures.append(_failure("accuracy", 0.5, floor))
  sliced = result.metric_validations_per_slice.add()
  sliced.slice_key.single_slice_keys.add(column="label", int64_value=3)
  sliced.failures.append(_failure("loss", 0.25, drop, is_diff=True))
  result.missing_slices.add(feature_keys=["label"])
  _write_validation(tmp_path / "bad", result)

  report = summary.read_tfma_validation(str(tmp_path / "bad"))
  assert report == {
    "ok": False,
    "failures": [
      "accuracy = 0.5 is outside the value threshold (lower bound 0.9)",
      "loss changed by +0.25 against the last blessed model, beyond the change threshold "
      "(absolute +0.1; lower is better) (slice label=3)",
      'no examples in slice feature_keys: "label"',
    ],
  }


@pytest.mark.parametrize("ok", [True, False])
def test_validation_without_metric_failures(tmp_path, ok):
  _write_validation(tmp_path, validation_result_pb2.ValidationResult(validation_ok=ok))
  report = summary.read_tfma_validation(str(tmp_path))
  assert report["ok"] is ok
  assert bool(report["failures"]) is not ok
  assert summary.read_tfma_validation(str(tmp_path / "missing")) is None
