"""A count label read both ways: the trainer's two heads, the reading it keeps, what it serves,
and the Evaluator following it (models/tabular/readings.py, core.tasks.reads_both)."""

import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from tfx.types import artifact_utils, standard_artifacts
from tfx.types import standard_component_specs as sc
from tfx.utils import proto_utils

from components import model_contract
from components.evaluator import executor as evaluator_executor
from components.evaluator.spec import AUTO_FLOOR_KEY, QUANTITY_EVAL_CONFIG_KEY
from core import floors, properties, tasks
from models.tabular import layers, readings
from tests.support import tabular_data as td


def _train(root, data, task=tasks.AUTO, count_readings=False):
  from components.distributed_trainer import trainer_api
  from models.tabular import plan as tabular_plan
  from models.tabular import runner

  name = f"{task}-{count_readings}"
  settings = tabular_plan.RunSettings(
    train_files=[f"{data['examples']}/Split-train/*"],
    eval_files=[f"{data['examples']}/Split-eval/*"],
    schema_path=data["schema"],
    serving_model_dir=str(root / name / "Format-Serving"),
    model_run_dir=str(root / f"run-{name}"),
    label_key=td.LABEL,
    task=task,
    count_readings=count_readings,
    # A short plan: what is tested is which reading is kept and served, not how well.
    hparams={"max_epochs": 30},
  )
  return root / name, runner.train(settings, trainer_api.default_strategy())


@pytest.fixture(scope="module")
def counts(tmp_path_factory):
  root = tmp_path_factory.mktemp("counts")
  data = td.write_examples(str(root), td.COUNT, train_rows=1500, eval_rows=400)
  examples = standard_artifacts.Examples()
  examples.uri = data["examples"]
  examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
  return root, data, examples


@pytest.fixture(scope="module")
def both(counts):
  """The trainer on its own (`--task auto`): it decides from the label that both readings
  apply."""
  root, data, _ = counts
  return _train(root, data)


def test_a_count_is_trained_both_ways_and_serves_the_reading_that_erred_less(both, counts):
  model_uri, result = both
  kept = result.plan["readings"]
  scores = tasks.Readings.from_json(kept)
  assert kept["winner"] == scores.winner and kept["reason"] == scores.describe()
  assert kept["rows"] == result.plan["holdout_rows"] > 0
  assert 0 < scores.classes_rmse < 10 and 0 < scores.quantity_rmse < 10
  # The result, the contract and the SavedModel all say the winner's task.
  contract = model_contract.read_contract(str(model_uri / "Format-Serving"))
  assert result.task == contract.task == scores.task
  loaded = tf.keras.models.load_model(str(model_uri / "Format-Serving"))
  rows = counts[1]["eval"][:5]
  out = loaded(td.model_inputs(rows, ("city", "color"))).numpy()
  if scores.task == tasks.REGRESSION:
    assert out.shape == (5, 1) and contract.label["classes"] == []
    assert set(result.eval_metrics) >= {"rmse", "mae"}
  else:
    width = len(contract.label["classes"])
    assert out.shape == (5, width) and np.allclose(out.sum(axis=1), 1.0, atol=1e-5)
    assert "accuracy" in result.eval_metrics


def test_the_pipelines_decision_turns_both_readings_on_and_task_turns_them_off(counts, both):
  root, data, _ = counts
  # Given the pipeline's resolved task with its decision, the trainer reads both ways again.
  _, decided = _train(root, data, tasks.MULTICLASS, count_readings=True)
  assert decided.plan["readings"] == both[1].plan["readings"]
  # --task multiclass alone: classes, one head wide as the classes.
  model_uri, classes = _train(root, data, tasks.MULTICLASS)
  assert "readings" not in classes.plan and classes.task == tasks.MULTICLASS
  contract = model_contract.read_contract(str(model_uri / "Format-Serving"))
  loaded = tf.keras.models.load_model(str(model_uri / "Format-Serving"))
  width = loaded(td.model_inputs(data["eval"][:2], ("city", "color"))).shape[1]
  assert width == len(contract.label["classes"]) == len({r[td.LABEL] for r in data["train"]})


def test_either_reading_of_the_two_headed_model_saves_and_serves_its_own_output(tmp_path):
  inputs = tf.keras.Input(shape=(2,), name="x")
  dense = tf.keras.layers.Dense(4)  # 3 classes and the quantity
  trained = tf.keras.Model(inputs, layers.BothReadings(3, 5.0, 2.0, name="readings")(dense(inputs)))
  x = np.array([[0.5, -1.0], [2.0, 0.0]], np.float32)
  full = trained(x).numpy()
  logits = dense(x).numpy()
  np.testing.assert_allclose(full[:, :3], tf.nn.softmax(logits[:, :3]).numpy(), rtol=1e-6)
  np.testing.assert_allclose(full[:, 3], logits[:, 3] * 2.0 + 5.0, rtol=1e-5)
  label = tasks.LabelInfo("y", tasks.MULTICLASS, (0, 2, 7))
  for result, width in ((tasks.Readings(2.0, 1.0, 10), 1), (tasks.Readings(1.0, 2.0, 10), 3)):
    profile = _profile(label)
    served = readings.kept_model(trained, profile, result)
    tf.keras.models.save_model(served, str(tmp_path / result.winner))
    loaded = tf.keras.models.load_model(str(tmp_path / result.winner))
    np.testing.assert_allclose(loaded(x).numpy(), full[:, 3:] if width == 1 else full[:, :3])
    kept = readings.kept_profile(profile, result)
    assert (kept.label.task, kept.readings) == (result.task, False)
    assert kept.label.classes == (() if width == 1 else (0, 2, 7))


def _profile(label, mean=5.0, std=2.0):
  from models.tabular.profile import Profile

  return Profile((), label, "int64", 100, mean, std, readings=True)


def test_the_held_out_errors_are_the_expected_values_and_the_quantitys():
  profile = _profile(tasks.LabelInfo("y", tasks.MULTICLASS, (0, 2, 7)))
  outputs = np.array(
    [
      [1.0, 0.0, 0.0, 0.5],  # classes say 0, the quantity 0.5; truth 0
      [0.0, 0.5, 0.5, 4.0],  # classes' expected value 4.5, the quantity 4; truth 7
      [0.2, 0.2, 0.2, 9.0],  # a row outside the classes: left out
    ]
  )
  target = np.array([0, 2, -1])
  result = readings.errors(outputs, target, profile)
  assert result.rows == 2
  assert result.classes_rmse == pytest.approx(np.sqrt((0.0 + 2.5**2) / 2))
  assert result.quantity_rmse == pytest.approx(np.sqrt((0.5**2 + 3.0**2) / 2))
  with pytest.raises(ValueError, match="no held-out row"):
    readings.errors(outputs[2:], target[2:], profile)
  # mix.py's held-out loss: the classes' log loss plus the standardized squared error.
  loss = readings.held_out_loss(profile)(outputs[:2], target[:2])
  expected = -np.mean(np.log([1.0, 0.5])) + np.mean(np.square(np.array([0.5, -3.0]) / 2.0))
  assert loss == pytest.approx(expected)


def _quantity_config(max_mse):
  metrics = [
    tfma.MetricConfig(
      class_name="MeanSquaredError",
      threshold=tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(upper_bound={"value": max_mse})
      ),
    ),
    tfma.MetricConfig(class_name="ExampleCount"),
  ]
  return tfma.EvalConfig(
    model_specs=[
      tfma.ModelSpec(
        label_key=td.LABEL,
        signature_name="serving_default",
        preprocessing_function_names=[model_contract.TRANSFORM_SIGNATURE],
      )
    ],
    slicing_specs=[tfma.SlicingSpec()],
    metrics_specs=[tfma.MetricsSpec(metrics=metrics)],
  )


def _model(uri, task):
  model = standard_artifacts.Model()
  model.uri = str(uri)
  model.id = 7
  if task:
    model.set_string_custom_property(properties.TASK_PROPERTY, task)
  return model


def test_the_evaluator_takes_the_quantitys_config_and_floor_when_the_model_kept_it():
  classes = proto_utils.proto_to_json(tfma.EvalConfig())
  quantity = proto_utils.proto_to_json(_quantity_config(3.0))
  props = {
    sc.EVAL_CONFIG_KEY: classes,
    QUANTITY_EVAL_CONFIG_KEY: quantity,
    AUTO_FLOOR_KEY: json.dumps({"task": tasks.MULTICLASS}),
  }
  quantity_model = {sc.MODEL_KEY: [_model("/m", tasks.REGRESSION)]}
  regression = evaluator_executor._candidate_task(quantity_model)
  assert regression == tasks.REGRESSION
  followed = evaluator_executor._reading_followed(regression, props)
  assert followed[sc.EVAL_CONFIG_KEY] == quantity
  assert json.loads(followed[AUTO_FLOOR_KEY]) == {"task": tasks.REGRESSION}
  # A model that kept the classes, or a run without the decision, keeps the config as it is.
  kept = evaluator_executor._reading_followed(tasks.MULTICLASS, props)
  assert kept is props
  without = {k: v for k, v in props.items() if k != QUANTITY_EVAL_CONFIG_KEY}
  assert evaluator_executor._reading_followed(regression, without) is without


def test_a_count_that_kept_its_classes_is_blessed_on_their_expected_value():
  props = {QUANTITY_EVAL_CONFIG_KEY: "{}"}
  classes = evaluator_executor._candidate_task({sc.MODEL_KEY: [_model("/m", tasks.MULTICLASS)]})
  assert evaluator_executor._count_as_classes(classes, props)
  assert not evaluator_executor._count_as_classes(classes, {})
  quantity = evaluator_executor._candidate_task({sc.MODEL_KEY: [_model("/m", tasks.REGRESSION)]})
  assert not evaluator_executor._count_as_classes(quantity, props)


def test_a_live_version_of_the_other_reading_is_not_compared(tmp_path):
  props = {QUANTITY_EVAL_CONFIG_KEY: "{}"}
  tonight = evaluator_executor._candidate_task(
    {sc.MODEL_KEY: [_model(tmp_path / "m", tasks.REGRESSION)]}
  )
  # LiveModel's baseline carries no task property: its contract says it.
  live = tmp_path / "live"
  contract = model_contract.ModelContract(tasks.MULTICLASS, {"key": "y"}, [], "")
  model_contract.write_contract(str(live), contract)
  why = evaluator_executor._other_reading(tonight, [_model(live, "")], props)
  assert why.startswith(
    "the live version reads the count label as multiclass and tonight's model as regression"
  )
  same = _model(tmp_path / "same", tasks.REGRESSION)
  assert evaluator_executor._other_reading(tonight, [same], props) == ""
  assert evaluator_executor._other_reading(tonight, [_model(live, "")], {}) == ""


def test_the_evaluator_blesses_a_quantity_against_the_eval_splits_variance(both, counts, tmp_path):
  model_uri, result = both
  _, data, examples = counts
  if result.task != tasks.REGRESSION:
    pytest.skip("the classes won on this machine's numbers; the unit tests above cover the rest")
  labels = np.array([r[td.LABEL] for r in data["eval"]], np.float64)
  examples.set_string_custom_property(
    properties.EXAMPLES_LABEL_STATS,
    json.dumps(
      {
        "eval": {
          "rows": len(labels),
          "total": float(labels.sum()),
          "total_sq": float(np.square(labels).sum()),
        }
      }
    ),
  )
  evaluation = standard_artifacts.ModelEvaluation()
  evaluation.uri = str(tmp_path / "evaluation")
  blessing = standard_artifacts.ModelBlessing()
  blessing.uri = str(tmp_path / "blessing")
  (tmp_path / "evaluation").mkdir()
  (tmp_path / "blessing").mkdir()
  model = _model(model_uri, result.task)
  evaluator_executor.Executor().Do(
    {sc.EXAMPLES_KEY: [examples], sc.MODEL_KEY: [model]},
    {sc.EVALUATION_KEY: [evaluation], sc.BLESSING_KEY: [blessing]},
    {
      sc.EVAL_CONFIG_KEY: proto_utils.proto_to_json(tfma.EvalConfig()),
      QUANTITY_EVAL_CONFIG_KEY: proto_utils.proto_to_json(_quantity_config(1e9)),
      AUTO_FLOOR_KEY: json.dumps({"task": tasks.MULTICLASS}),
      sc.EXAMPLE_SPLITS_KEY: "null",
    },
  )
  floor = floors.from_label_stats(
    json.loads(examples.get_string_custom_property(properties.EXAMPLES_LABEL_STATS)),
    tasks.REGRESSION,
  )
  assert blessing.get_float_custom_property(properties.FLOOR_PROPERTY) == pytest.approx(floor.value)
  mse = result.eval_metrics["rmse"] ** 2
  assert blessing.get_int_custom_property("blessed") == int(mse < floor.value)
