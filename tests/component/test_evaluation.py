"""The Evaluator in process against stock TFMA: the same metrics, verdict and blessing."""

import json
import os

import pytest
import tensorflow_model_analysis as tfma
from tfx.components.evaluator import executor as stock_executor
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils, standard_artifacts
from tfx.types import standard_component_specs as sc
from tfx.utils import proto_utils

from components.evaluator import evaluation_lib
from components.evaluator import executor as our_evaluator
from tests.support import tabular_data as td

TASKS = ("binary", "multiclass", "regression")
# Stock TFMA batches the examples with Beam's BatchElements, which sizes batches by timing them,
# so its float32 sums run in an order that changes with the machine's load: its AUC on the
# same 600 rows came out 1.4e-6 apart from ours once (CI, 2026-11-29). One pair of 600 rows
# ranked the other way moves an AUC by about 1e-5, an accuracy by 1.7e-3.
METRIC_TOLERANCE = 5e-6


def _artifact(kind, uri, id_=0):
  artifact = kind()
  artifact.uri = str(uri)
  artifact.id = id_
  return artifact


def _train(root, data, task, steps, seed):
  from components.distributed_trainer import trainer_api
  from models.tabular import plan as tabular_plan
  from models.tabular import runner

  model_uri = root / f"model-{steps}-{seed}"
  settings = tabular_plan.RunSettings(
    train_files=[f"{data['examples']}/Split-train/*"],
    eval_files=[f"{data['examples']}/Split-eval/*"],
    schema_path=data["schema"],
    serving_model_dir=str(model_uri / "Format-Serving"),
    model_run_dir=str(root / f"run-{steps}-{seed}"),
    label_key=td.LABEL,
    task=task,
    train_steps=steps,
    num_epochs=2,
    seed=seed,
  )
  runner.train(settings, trainer_api.default_strategy())
  return model_uri


@pytest.fixture(scope="module")
def setups(tmp_path_factory):
  """task -> Examples artifact, a trained candidate and a weaker baseline."""
  out = {}
  for task in TASKS:
    root = tmp_path_factory.mktemp(task)
    data = td.write_examples(str(root), task, train_rows=500, eval_rows=400)
    examples = _artifact(standard_artifacts.Examples, data["examples"], 1)
    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    candidate = _artifact(standard_artifacts.Model, _train(root, data, task, 80, 1), 2)
    baseline = _artifact(standard_artifacts.Model, _train(root, data, task, 4, 2), 3)
    out[task] = (examples, candidate, baseline)
  return out


def _eval_config(task: str, floor: float) -> tfma.EvalConfig:
  """What `create_pipeline` configures for the task (floor, change bound, ExampleCount)."""
  if task == "regression":
    threshold = tfma.MetricThreshold(
      value_threshold=tfma.GenericValueThreshold(upper_bound={"value": floor}),
      change_threshold=tfma.GenericChangeThreshold(
        direction=tfma.MetricDirection.LOWER_IS_BETTER, relative={"value": 0.05}
      ),
    )
    metrics = [
      tfma.MetricConfig(class_name="MeanSquaredError", threshold=threshold),
      tfma.MetricConfig(class_name="MeanAbsoluteError"),
    ]
  else:
    threshold = tfma.MetricThreshold(
      value_threshold=tfma.GenericValueThreshold(lower_bound={"value": floor}),
      change_threshold=tfma.GenericChangeThreshold(
        direction=tfma.MetricDirection.HIGHER_IS_BETTER, absolute={"value": -0.01}
      ),
    )
    name = "BinaryAccuracy" if task == "binary" else "SparseCategoricalAccuracy"
    metrics = [tfma.MetricConfig(class_name=name, threshold=threshold)]
    if task == "binary":
      metrics.append(tfma.MetricConfig(class_name="AUC"))
  count = tfma.MetricThreshold(
    value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 50})
  )
  metrics.append(tfma.MetricConfig(class_name="ExampleCount", threshold=count))
  return tfma.EvalConfig(
    model_specs=[
      tfma.ModelSpec(
        label_key=td.LABEL,
        signature_name="serving_default",
        preprocessing_function_names=["transform_features"],
      )
    ],
    slicing_specs=[tfma.SlicingSpec()],
    metrics_specs=[tfma.MetricsSpec(metrics=metrics)],
  )


def _run(executor_class, out, examples, candidate, baseline, eval_config):
  evaluation = _artifact(standard_artifacts.ModelEvaluation, out / "evaluation")
  blessing = _artifact(standard_artifacts.ModelBlessing, out / "blessing")
  os.makedirs(blessing.uri, exist_ok=True)
  inputs = {sc.EXAMPLES_KEY: [examples], sc.MODEL_KEY: [candidate]}
  if baseline is not None:
    inputs[sc.BASELINE_MODEL_KEY] = [baseline]
  props = {
    sc.EVAL_CONFIG_KEY: proto_utils.proto_to_json(eval_config),
    sc.EXAMPLE_SPLITS_KEY: "null",
  }
  context = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=[])
  executor_class(context).Do(
    inputs, {sc.EVALUATION_KEY: [evaluation], sc.BLESSING_KEY: [blessing]}, props
  )
  return evaluation, blessing


@pytest.fixture
def in_process_writes(monkeypatch) -> list:
  """A list that gets an entry each time the in-process path writes an evaluation."""
  written = []
  write = evaluation_lib.write_evaluation
  monkeypatch.setattr(
    evaluation_lib, "write_evaluation", lambda *a, **k: written.append(1) or write(*a, **k)
  )
  return written


def _metrics(uri) -> dict:
  out = {}
  for per_slice in tfma.load_metrics(uri):
    for kv in per_slice.metric_keys_and_values:
      out[(kv.key.name, kv.key.model_name, kv.key.is_diff)] = kv.value.double_value.value
  return out


def _failures(uri, approx: bool = False) -> tuple:
  """Whether validation passed, and each failure's metric and value; with `approx`, the values
  compare equal to those within METRIC_TOLERANCE or a millionth of them (two implementations
  sum in different orders)."""
  result = tfma.load_validation_result(uri)
  failures = sorted(
    (
      f.metric_key.name,
      f.metric_key.model_name,
      f.metric_key.is_diff,
      f.metric_value.double_value.value,
    )
    for s in result.metric_validations_per_slice
    for f in s.failures
  )
  if approx:
    failures = [
      (*key, pytest.approx(value, rel=1e-6, abs=METRIC_TOLERANCE)) for *key, value in failures
    ]
  return result.validation_ok, failures


@pytest.mark.parametrize("with_baseline", [False, True], ids=["first run", "against a baseline"])
@pytest.mark.parametrize("task", TASKS)
def test_in_process_evaluation_equals_stock_tfma(
  setups, tmp_path, in_process_writes, task, with_baseline
):
  written = in_process_writes
  examples, candidate, baseline = setups[task]
  floors = {"binary": 0.6, "multiclass": 0.4, "regression": 1e9}
  config = _eval_config(task, floors[task])
  base = baseline if with_baseline else None
  stock = _run(stock_executor.Executor, tmp_path / "stock", examples, candidate, base, config)
  ours = _run(our_evaluator.Executor, tmp_path / "ours", examples, candidate, base, config)
  assert written == [1], "the in-process path did not run"
  theirs, mine = _metrics(stock[0].uri), _metrics(ours[0].uri)
  assert set(mine) == set(theirs), (sorted(mine), sorted(theirs))
  for key, value in theirs.items():
    assert mine[key] == pytest.approx(value, abs=METRIC_TOLERANCE), key
  assert _failures(ours[0].uri) == _failures(stock[0].uri, approx=True)
  assert sorted(os.listdir(ours[1].uri)) == sorted(os.listdir(stock[1].uri))
  for key in ("blessed", "current_model_id", "baseline_model_id"):
    assert ours[1].get_int_custom_property(key) == stock[1].get_int_custom_property(key), key
  assert sorted(os.listdir(ours[0].uri)) == sorted(os.listdir(stock[0].uri))
  run = json.loads((tmp_path / "ours" / "evaluation" / "eval_config.json").read_text())
  assert run == json.loads((tmp_path / "stock" / "evaluation" / "eval_config.json").read_text())


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_a_model_that_misses_its_floor_is_not_blessed_the_same_way(setups, tmp_path, task):
  examples, candidate, baseline = setups[task]
  config = _eval_config(task, 0.999 if task == "binary" else 1e-6)
  stock = _run(stock_executor.Executor, tmp_path / "stock", examples, candidate, baseline, config)
  ours = _run(our_evaluator.Executor, tmp_path / "ours", examples, candidate, baseline, config)
  ok, failures = _failures(ours[0].uri)
  assert not ok and failures and (ok, failures) == _failures(stock[0].uri, approx=True)
  assert os.listdir(ours[1].uri) == ["NOT_BLESSED"] == os.listdir(stock[1].uri)


def _eval_examples(root, x, labels):
  """An Examples artifact of one eval split: a float feature `x` and `label`, stored as int64
  for integer labels and as floats otherwise."""
  import numpy as np
  import tensorflow as tf

  split = root / "examples" / "Split-eval"
  split.mkdir(parents=True)
  whole = np.issubdtype(labels.dtype, np.integer)
  with tf.io.TFRecordWriter(str(split / "data.gz"), options="GZIP") as writer:
    for value, label in zip(x, labels, strict=True):
      example = tf.train.Example()
      example.features.feature["x"].float_list.value.append(float(value))
      feature = example.features.feature["label"]
      if whole:
        feature.int64_list.value.append(int(label))
      else:
        feature.float_list.value.append(float(label))
      writer.write(example.SerializeToString())
  examples = _artifact(standard_artifacts.Examples, root / "examples", 1)
  examples.split_names = artifact_utils.encode_split_names(["eval"])
  return examples


@pytest.fixture(scope="module")
def two_column(tmp_path_factory):
  """A binary label 0/1 (int64) and a model with a 2-class softmax, as stock modules write."""
  import numpy as np
  import tensorflow as tf

  root = tmp_path_factory.mktemp("two_column")
  rng = np.random.default_rng(0)
  x = rng.normal(size=600).astype(np.float32)
  y = (x + rng.normal(scale=0.7, size=600) > 0).astype(np.int64)
  examples = _eval_examples(root, x, y)
  inputs = tf.keras.Input((1,), name="x")
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(2, activation="softmax")(inputs * 3.0))
  model.layers[-1].set_weights([np.array([[-1.0, 1.0]], np.float32), np.zeros(2, np.float32)])
  spec = {"x": tf.io.FixedLenFeature([1], tf.float32)}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
  def serve(examples):
    return {"outputs": model(tf.io.parse_example(examples, spec)["x"])}

  model_uri = root / "model"
  model.save(
    str(model_uri / "Format-Serving"), save_format="tf", signatures={"serving_default": serve}
  )
  return examples, _artifact(standard_artifacts.Model, model_uri, 2)


def test_binary_metrics_on_a_two_class_softmax_pair_as_tfma_pairs_them(
  two_column, tmp_path, in_process_writes
):
  written = in_process_writes
  examples, model = two_column
  config = tfma.EvalConfig(
    model_specs=[tfma.ModelSpec(label_key="label", signature_name="serving_default")],
    slicing_specs=[tfma.SlicingSpec()],
    metrics_specs=[
      tfma.MetricsSpec(
        metrics=[
          tfma.MetricConfig(
            class_name="BinaryAccuracy",
            threshold=tfma.MetricThreshold(
              value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.5})
            ),
          ),
          tfma.MetricConfig(class_name="AUC"),
          tfma.MetricConfig(class_name="ExampleCount"),
        ]
      )
    ],
  )
  stock = _run(stock_executor.Executor, tmp_path / "stock", examples, model, None, config)
  ours = _run(our_evaluator.Executor, tmp_path / "ours", examples, model, None, config)
  assert written == [1], "the in-process path did not run"
  theirs, mine = _metrics(stock[0].uri), _metrics(ours[0].uri)
  assert set(mine) == set(theirs)
  for key, value in theirs.items():
    assert mine[key] == pytest.approx(value, abs=METRIC_TOLERANCE), key
  assert _failures(ours[0].uri) == _failures(stock[0].uri, approx=True)


@pytest.fixture(scope="module")
def answers_nan(tmp_path_factory):
  """A regression label and a model that answers NaN for x < -1 (sqrt of x + 1), 16% of rows."""
  import numpy as np
  import tensorflow as tf

  root = tmp_path_factory.mktemp("answers_nan")
  x = np.random.default_rng(1).normal(size=400).astype(np.float32)
  examples = _eval_examples(root, x, x)
  spec = {"x": tf.io.FixedLenFeature([1], tf.float32)}

  class Model(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
      return {"outputs": tf.sqrt(tf.io.parse_example(examples, spec)["x"] + 1.0)}

  model, model_uri = Model(), root / "model"
  tf.saved_model.save(
    model, str(model_uri / "Format-Serving"), signatures={"serving_default": model.serve}
  )
  return examples, _artifact(standard_artifacts.Model, model_uri, 2), int(np.sum(x < -1))


def test_a_model_answering_nan_for_some_rows_is_not_blessed_where_stock_blesses_it(
  answers_nan, tmp_path
):
  from components.artifact_files import evaluation_metrics

  examples, model, nan_rows = answers_nan
  mse = tfma.MetricConfig(
    class_name="MeanSquaredError",
    threshold=tfma.MetricThreshold(
      value_threshold=tfma.GenericValueThreshold(upper_bound={"value": 10.0})
    ),
  )
  config = tfma.EvalConfig(
    model_specs=[tfma.ModelSpec(label_key="label", signature_name="serving_default")],
    slicing_specs=[tfma.SlicingSpec()],
    metrics_specs=[tfma.MetricsSpec(metrics=[mse, tfma.MetricConfig(class_name="ExampleCount")])],
  )
  stock = _run(stock_executor.Executor, tmp_path / "stock", examples, model, None, config)
  ours = _run(our_evaluator.Executor, tmp_path / "ours", examples, model, None, config)
  # The same metrics: TFMA's mean squared error leaves the NaN rows out, and so does ours.
  theirs, mine = _metrics(stock[0].uri), _metrics(ours[0].uri)
  assert set(mine) == set(theirs)
  for key, value in theirs.items():
    assert mine[key] == pytest.approx(value, abs=METRIC_TOLERANCE), key
  assert 40 < nan_rows < 100
  # Stock blesses it on the other rows; ours does not, and says why.
  assert os.listdir(stock[1].uri) == ["BLESSED"]
  assert os.listdir(ours[1].uri) == ["NOT_BLESSED"]
  assert _failures(ours[0].uri) == (False, [("non_finite_answers", "", False, float(nan_rows))])
  (failure,) = evaluation_metrics.read_validation(ours[0].uri)["failures"]
  assert failure.startswith(f"the model answered NaN or infinity for {nan_rows} eval rows")


def test_anything_else_goes_to_stock_tfma():
  config = tfma.EvalConfig(
    model_specs=[tfma.ModelSpec(label_key="y")],
    slicing_specs=[tfma.SlicingSpec()],
    metrics_specs=[tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name="ExampleCount")])],
  )
  assert evaluation_lib.plan(config, [], {}).in_process
  sliced = tfma.EvalConfig()
  sliced.CopyFrom(config)
  sliced.slicing_specs.add(feature_keys=["city"])
  assert "slices" in evaluation_lib.plan(sliced, [], {}).reason
  other = tfma.EvalConfig()
  other.CopyFrom(config)
  other.metrics_specs[0].metrics.add(class_name="Precision")
  assert "Precision" in evaluation_lib.plan(other, [], {}).reason
  assert not evaluation_lib.plan(config, ["--runner=DataflowRunner"], {}).in_process
  assert not evaluation_lib.plan(config, [], {"module_file": "m.py"}).in_process


@pytest.fixture(scope="module")
def renamed_label(tmp_path_factory):
  """A model with TFX's penguin layout: its `transform_features` signature gives `label_xf`
  (the class index of the raw `label`) and `x_xf`, and no `label`. Eval rows with the label as
  text ('a'/'b') and with it as the class number (0/1)."""
  import numpy as np
  import tensorflow as tf

  root = tmp_path_factory.mktemp("renamed_label")
  rng = np.random.default_rng(2)
  x = rng.normal(size=300).astype(np.float32)
  y = (x + rng.normal(scale=0.5, size=300) > 0).astype(np.int64)
  examples = {}
  for kind in ("text", "number"):
    split = root / kind / "Split-eval"
    split.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(split / "data.gz"), options="GZIP") as writer:
      for value, label in zip(x, y, strict=True):
        example = tf.train.Example()
        example.features.feature["x"].float_list.value.append(float(value))
        feature = example.features.feature["label"]
        if kind == "text":
          feature.bytes_list.value.append(b"ab"[label : label + 1])
        else:
          feature.int64_list.value.append(int(label))
        writer.write(example.SerializeToString())
    examples[kind] = _artifact(standard_artifacts.Examples, root / kind, 1)
    examples[kind].split_names = artifact_utils.encode_split_names(["eval"])
  models = {kind: _renamed_label_model(root / kind, kind) for kind in examples}
  return examples, models


def _renamed_label_model(root, kind):
  import tensorflow as tf

  spec = {"x": tf.io.FixedLenFeature([1], tf.float32)}
  label = {"label": tf.io.FixedLenFeature([1], tf.string if kind == "text" else tf.int64)}

  class Model(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
      x = tf.io.parse_example(examples, spec)["x"]
      return {"outputs": tf.concat([-x, x], axis=1)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(self, examples):
      raw = tf.io.parse_example(examples, {**spec, **label})
      index = raw["label"] == b"b" if kind == "text" else raw["label"] == 1
      return {"x_xf": raw["x"], "label_xf": tf.cast(index, tf.int64)}

  model, model_uri = Model(), root / "model"
  signatures = {"serving_default": model.serve, "transform_features": model.transform_features}
  tf.saved_model.save(model, str(model_uri / "Format-Serving"), signatures=signatures)
  return _artifact(standard_artifacts.Model, model_uri, 2)


def _accuracy_config(label_key: str) -> tfma.EvalConfig:
  return tfma.EvalConfig(
    model_specs=[
      tfma.ModelSpec(
        label_key=label_key,
        signature_name="serving_default",
        preprocessing_function_names=["transform_features"],
      )
    ],
    slicing_specs=[tfma.SlicingSpec()],
    metrics_specs=[
      tfma.MetricsSpec(
        metrics=[
          tfma.MetricConfig(class_name="SparseCategoricalAccuracy"),
          tfma.MetricConfig(class_name="ExampleCount"),
        ]
      )
    ],
  )


def test_a_text_label_the_transform_renames_stops_the_evaluator_in_one_line(
  renamed_label, tmp_path
):
  """Without --eval-label-key TFMA reads the raw text label and fails deep in Beam ("Cast string
  to float is not supported"); the Evaluator names the fix before it starts."""
  from core import tasks

  examples, models = renamed_label
  model = models["text"]
  with pytest.raises(tasks.LabelError, match=r"Transform does not pass it on.*--eval-label-key"):
    _run(our_evaluator.Executor, tmp_path, examples["text"], model, None, _accuracy_config("label"))
  assert not os.path.exists(tmp_path / "evaluation") and os.listdir(tmp_path / "blessing") == []
  # A run_fn module's model, scored on the label as the examples hold it (a compiled pipeline:
  # its pre-flight checks could not read the data).
  raw = _accuracy_config("label")
  del raw.model_specs[0].preprocessing_function_names[:]
  with pytest.raises(tasks.LabelError, match=r"is text, and the model is scored against the"):
    _run(our_evaluator.Executor, tmp_path / "raw", examples["text"], model, None, raw)
  # With the label as the model sees it, the same rows are scored.
  evaluation, _ = _run(
    our_evaluator.Executor,
    tmp_path / "xf",
    examples["text"],
    model,
    None,
    _accuracy_config("label_xf"),
  )
  accuracy = _metrics(evaluation.uri)[("sparse_categorical_accuracy", "", False)]
  assert 0.7 < accuracy < 1.0


def test_a_number_label_the_transform_renames_is_read_raw_in_process_as_tfma_reads_it(
  renamed_label, tmp_path, in_process_writes
):
  written = in_process_writes
  examples, models = renamed_label
  model = models["number"]
  config = _accuracy_config("label")
  stock = _run(stock_executor.Executor, tmp_path / "stock", examples["number"], model, None, config)
  ours = _run(our_evaluator.Executor, tmp_path / "ours", examples["number"], model, None, config)
  assert written == [1], "the in-process path did not run"
  theirs, mine = _metrics(stock[0].uri), _metrics(ours[0].uri)
  assert set(mine) == set(theirs)
  assert theirs[("sparse_categorical_accuracy", "", False)] > 0.7
  for key, value in theirs.items():
    assert mine[key] == pytest.approx(value, abs=METRIC_TOLERANCE), key
