"""Executor.Do tests of the DistributedTrainer on tiny digits Examples (in-process path)."""

import json
import os
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tfx.proto import trainer_pb2
from tfx.types import standard_component_specs as sc
from tfx.utils import json_utils, proto_utils

from components.distributed_trainer import constants, executor
from core import defaults, properties
from core.errors import UserCodeError, UserInputError
from models.tabular import hparams as tabular_hparams
from tests.support import example_files
from tests.support.cli_runs import REPO_ROOT

STOCK_MODULE = textwrap.dedent('''
  """A module written for the stock TFX Trainer (penguin example style)."""

  import json
  import os
  from typing import List

  import tensorflow as tf
  from tensorflow_metadata.proto.v0 import schema_pb2
  from tensorflow_transform.tf_metadata import schema_utils
  from tfx import v1 as tfx
  from tfx_bsl.public import tfxio

  _FEATURE_KEYS = [f"pixel_{i}" for i in range(64)]
  _LABEL_KEY = "label"


  def _input_fn(file_pattern: List[str], data_accessor, schema, batch_size: int):
    return data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=_LABEL_KEY),
        schema=schema).repeat()


  def _build_keras_model():
    inputs = [tf.keras.layers.Input(shape=(1,), name=f, dtype=tf.int64) for f in _FEATURE_KEYS]
    x = tf.keras.layers.concatenate([tf.cast(i, tf.float32) / 16.0 for i in inputs])
    x = tf.keras.layers.Dense(32, activation="relu")(x)
    outputs = tf.keras.layers.Dense(10, activation="softmax")(x)
    model = tf.keras.Model(inputs=inputs, outputs=outputs)
    model.compile(optimizer=tf.keras.optimizers.Adam(1e-2),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                  metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])
    return model


  def _serve_fn(model, schema):
    feature_spec = schema_utils.schema_as_feature_spec(schema).feature_spec
    feature_spec.pop(_LABEL_KEY)

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
    def serve_tf_examples_fn(serialized_tf_examples):
      return {"outputs": model(tf.io.parse_example(serialized_tf_examples, feature_spec))}

    return serve_tf_examples_fn


  # TFX Trainer will call this function.
  def run_fn(fn_args: tfx.components.FnArgs):
    schema = tfx.utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
    train_dataset = _input_fn(fn_args.train_files, fn_args.data_accessor, schema, 32)
    eval_dataset = _input_fn(fn_args.eval_files, fn_args.data_accessor, schema, 32)
    model = _build_keras_model()
    history = model.fit(train_dataset, steps_per_epoch=fn_args.train_steps,
                        validation_data=eval_dataset, validation_steps=fn_args.eval_steps,
                        callbacks=[tf.keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir)],
                        verbose=0)
    signatures = {"serving_default": _serve_fn(model, schema)}
    model.save(fn_args.serving_model_dir, save_format="tf", signatures=signatures)
    # Only for the test: what the DistributedTrainer handed over beyond the stock FnArgs.
    with open(os.path.join(fn_args.model_run_dir, "seen.json"), "w") as f:
      json.dump({"strategy": type(getattr(fn_args, "strategy", None)).__name__,
                 "in_scope": tf.distribute.has_strategy(),
                 "custom_config": fn_args.custom_config,
                 "val_accuracy": history.history["val_sparse_categorical_accuracy"][-1]}, f)
''')

BUILD_MODEL_MODULE = textwrap.dedent('''
  """build_model module: a network on the preprocessed vector, named so tests can find it."""

  import tensorflow as tf


  def build_model(hparams):
    inputs = tf.keras.Input(shape=(hparams["num_features"],))
    x = tf.keras.layers.Dense(hparams["units"], activation="relu", name="user_hidden")(inputs)
    x = tf.keras.layers.Dense(hparams["num_outputs"])(x)
    outputs = tf.keras.layers.Activation("softmax", dtype="float32")(x)
    return tf.keras.Model(inputs, outputs, name="user_body")
''')


def _props(module_file=None, module_path=None, steps=300, eval_steps=0, custom_config=None, **kw):
  props = {
    sc.TRAIN_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.TrainArgs(num_steps=steps)),
    sc.EVAL_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.EvalArgs(num_steps=eval_steps)),
    sc.MODULE_FILE_KEY: module_file,
    sc.MODULE_PATH_KEY: module_path,
    sc.CUSTOM_CONFIG_KEY: json_utils.dumps(custom_config),
    constants.STRATEGY_KEY: "auto",
    constants.LOCAL_WORKERS_KEY: 0,
    constants.LOCAL_PS_KEY: 0,
  }
  props.update(kw)
  return props


def _serialized_eval_examples(input_dict, limit=50):
  files = tf.io.gfile.glob(os.path.join(input_dict[sc.EXAMPLES_KEY][0].uri, "Split-eval", "*"))
  ds = tf.data.TFRecordDataset(files, compression_type="GZIP").take(limit)
  return [r.numpy() for r in ds]


def _dense_rows(serialized, feature_keys):
  rows = []
  for record in serialized:
    example = tf.train.Example.FromString(record)
    rows.append([float(example.features.feature[k].int64_list.value[0]) for k in feature_keys])
  return np.array(rows, dtype=np.float32)


def _props_of(artifact):
  return {k: v for k, v in artifact.mlmd_artifact.custom_properties.items()}


def _load_keras(model_artifact):
  """The Keras model behind the serving SavedModel (the Optimizer loads it the same way)."""
  from models.tabular import layers  # noqa: F401  (registers the layers)

  return tf.keras.models.load_model(
    os.path.join(model_artifact.uri, "Format-Serving"), compile=False
  )


def test_do_default_module_trains_exports_and_records(tmp_path, digits_csv):
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  executor.Executor().Do(inputs, outputs, _props(module_path=defaults.DEFAULT_MODULE_PATH))

  model = outputs[sc.MODEL_KEY][0]
  props = _props_of(model)
  assert props[properties.STRATEGY_PROPERTY].string_value == "one_device"
  assert props[properties.NUM_REPLICAS_PROPERTY].int_value == 1
  assert "OneDeviceStrategy" in props[properties.STRATEGY_REASON_PROPERTY].string_value
  assert props[properties.MODULE_STYLE_PROPERTY].string_value == "tabular"
  assert props[properties.TRAINER_MODULE_PROPERTY].string_value == defaults.DEFAULT_MODULE_PATH
  assert props[properties.TASK_PROPERTY].string_value == "multiclass"
  assert json.loads(props[properties.LABEL_CLASSES_PROPERTY].string_value) == list(range(10))
  assert props[properties.STEPS_RUN_PROPERTY].int_value == 300
  metrics = json.loads(props[properties.EVAL_METRICS_PROPERTY].string_value)
  assert metrics["accuracy"] >= 0.90
  assert metrics["examples"] > 300
  assert props[properties.EVAL_ACCURACY_PROPERTY].double_value == pytest.approx(metrics["accuracy"])
  hparams = json.loads(props[properties.HPARAMS_PROPERTY].string_value)
  # Digits' 1,400-odd training rows get the narrow default width.
  assert hparams["hidden_units"] == tabular_hparams.hidden_units_for(1400) == 64
  # --train-steps trains at the usual rate (`learning_rate_for`).
  assert hparams["learning_rate"] == tabular_hparams.LEARNING_RATE

  # The contract: one float32 input holding the 64 numeric columns in name order.
  serving_dir = os.path.join(model.uri, "Format-Serving")
  with open(os.path.join(serving_dir, "assets.extra", "contract.json")) as f:
    contract = json.load(f)
  assert contract["task"] == "multiclass"
  assert contract["label"]["key"] == "label" and contract["label"]["classes"] == list(range(10))
  [numeric] = contract["inputs"]
  assert numeric["name"] == "numeric" and numeric["dtype"] == "float32"
  assert numeric["shape"] == [-1, 64]
  columns = [c["column"] for c in numeric["columns"]]
  assert columns == sorted(f"pixel_{i}" for i in range(64))

  # Serving SavedModel: serialized tf.Example in (named `examples`), probabilities out.
  serialized = _serialized_eval_examples(inputs)
  loaded = tf.saved_model.load(serving_dir)
  serve = loaded.signatures["serving_default"]
  assert list(serve.structured_input_signature[1]) == ["examples"]
  probs = serve(examples=tf.constant(serialized))["outputs"].numpy()
  assert probs.shape == (len(serialized), 10) and probs.dtype == np.float32
  np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
  # transform_features gives the label as the model sees it: the class index.
  labels = loaded.signatures["transform_features"](examples=tf.constant(serialized))["label"]
  expected = [
    tf.train.Example.FromString(r).features.feature["label"].int64_list.value[0] for r in serialized
  ]
  np.testing.assert_array_equal(labels.numpy(), expected)
  # The Keras model behind it is the same model, fed by the contract's input layout.
  keras_probs = _load_keras(model).predict({"numeric": _dense_rows(serialized, columns)}, verbose=0)
  np.testing.assert_allclose(probs, keras_probs, atol=1e-5)

  # No staging leftovers, TensorBoard logs in model_run.
  assert sorted(os.listdir(model.uri)) == ["Format-Serving"]
  run_dir = outputs[sc.MODEL_RUN_KEY][0].uri
  assert tf.io.gfile.glob(os.path.join(run_dir, "logs", "train", "events.out.tfevents.*"))


def test_do_runs_stock_run_fn_module_unchanged(tmp_path, digits_csv):
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  module = tmp_path / "stock_module.py"
  module.write_text(STOCK_MODULE)
  executor.Executor().Do(
    inputs,
    outputs,
    _props(module_file=str(module), steps=150, eval_steps=5, custom_config={"k": 1}),
  )

  model = outputs[sc.MODEL_KEY][0]
  props = _props_of(model)
  assert props[properties.MODULE_STYLE_PROPERTY].string_value == "run_fn"
  assert props[properties.TRAINER_MODULE_PROPERTY].string_value == str(module)
  assert props[properties.STRATEGY_PROPERTY].string_value == "one_device"
  assert properties.EVAL_ACCURACY_PROPERTY not in props
  with open(os.path.join(outputs[sc.MODEL_RUN_KEY][0].uri, "seen.json")) as f:
    seen = json.load(f)
  assert seen["strategy"] == "OneDeviceStrategy"
  assert seen["in_scope"] is True
  assert seen["custom_config"] == {"k": 1}
  assert seen["val_accuracy"] >= 0.85
  serve = tf.saved_model.load(os.path.join(model.uri, "Format-Serving")).signatures[
    "serving_default"
  ]
  probs = serve(examples=tf.constant(_serialized_eval_examples(inputs)))["outputs"].numpy()
  assert probs.shape == (50, 10)
  # A stock module writes no Keras copy; consumers must skip, so none may appear.
  assert not os.path.exists(os.path.join(model.uri, "Format-Keras"))


def test_do_build_model_module_hparams_mixed_precision_and_warm_start(tmp_path, digits_csv):
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path / "a"), str(digits_csv))
  module = tmp_path / "build_model_module.py"
  module.write_text(BUILD_MODEL_MODULE)
  hparams = {"units": 48, "learning_rate": 0.01}
  props = _props(
    module_file=str(module),
    steps=200,
    custom_config={"hparams": hparams},
    **{constants.MIXED_PRECISION_KEY: "mixed_bfloat16", constants.NUM_EPOCHS_KEY: 2},
  )
  executor.Executor().Do(inputs, outputs, props)
  first = outputs[sc.MODEL_KEY][0]
  first_props = _props_of(first)
  assert first_props[properties.MODULE_STYLE_PROPERTY].string_value == "build_model"
  # The run_fn that built it, loaded by module path like any module's.
  trainer_module = first_props[properties.TRAINER_MODULE_PROPERTY].string_value
  assert f"{trainer_module}.{defaults.RUN_FN}" == defaults.BUILD_MODEL_RUN_FN
  first_accuracy = first_props[properties.EVAL_ACCURACY_PROPERTY].double_value
  assert first_accuracy >= 0.85
  body = _load_keras(first).get_layer("user_body")
  assert body.get_layer("user_hidden").units == 48  # hparams from custom_config reached it.
  assert body.get_layer("user_hidden").dtype_policy.name == "mixed_bfloat16"
  assert tf.keras.mixed_precision.global_policy().name == "float32"  # restored afterwards

  # Warm start: 1 step from the first model keeps its accuracy; from scratch it is near chance.
  inputs_b, outputs_b = example_files.trainer_artifacts(str(tmp_path / "b"), str(digits_csv))
  inputs_b[sc.BASE_MODEL_KEY] = [first]
  props_b = _props(module_file=str(module), steps=1, custom_config={"hparams": hparams})
  executor.Executor().Do(inputs_b, outputs_b, props_b)
  warm = _props_of(outputs_b[sc.MODEL_KEY][0])[properties.EVAL_ACCURACY_PROPERTY].double_value
  assert warm >= first_accuracy - 0.05
  inputs_c, outputs_c = example_files.trainer_artifacts(str(tmp_path / "c"), str(digits_csv))
  executor.Executor().Do(inputs_c, outputs_c, props_b)
  cold = _props_of(outputs_c[sc.MODEL_KEY][0])[properties.EVAL_ACCURACY_PROPERTY].double_value
  assert cold < 0.5


def test_do_wraps_an_error_in_user_build_model_naming_module_and_function(tmp_path, digits_csv):
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  module = tmp_path / "broken_module.py"
  module.write_text("def build_model(hparams):\n  raise KeyError('no_such_hparam')\n")
  with pytest.raises(UserCodeError) as raised:
    executor.Executor().Do(inputs, outputs, _props(module_file=str(module), steps=1))
  message = str(raised.value)
  assert "build_model" in message and str(module) in message and "no_such_hparam" in message
  assert isinstance(raised.value.__cause__, KeyError)


def test_a_run_fn_mixing_keras_3_into_tf_keras_gets_a_note_naming_the_fix(tmp_path, digits_csv):
  # As TFX's Airflow-workshop taxi module does: `from keras.callbacks import LambdaCallback`
  # (Keras 3 here) passed to the fit of a tf.keras (tf_keras) model.
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  module = tmp_path / "keras3_callback_module.py"
  module.write_text(
    textwrap.dedent("""
      import numpy as np
      import tensorflow as tf
      from keras.callbacks import LambdaCallback


      def run_fn(fn_args):
        model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
        model.compile(loss="mse")
        model.fit(np.zeros((4, 2)), np.zeros(4), callbacks=[LambdaCallback()], verbose=0)
    """)
  )
  with pytest.raises(UserCodeError) as raised:
    executor.Executor().Do(inputs, outputs, _props(module_file=str(module), steps=1))
  message = str(raised.value)
  assert message.startswith(f"run_fn in {module} raised AttributeError: "), message
  assert "imports `keras`, which is Keras 3." in message
  assert message.endswith("import from tensorflow.keras (or tf_keras) instead."), message
  assert isinstance(raised.value.__cause__, AttributeError)


def test_a_run_fn_reading_transform_output_without_a_transform_names_the_fix(tmp_path, digits_csv):
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  module = tmp_path / "needs_transform_module.py"
  module.write_text(
    "import tensorflow_transform as tft\n\n\n"
    "def run_fn(fn_args):\n"
    "  tft.TFTransformOutput(fn_args.transform_output).transformed_feature_spec()\n"
  )
  with pytest.raises(UserInputError) as raised:
    executor.Executor().Do(inputs, outputs, _props(module_file=str(module), steps=1))
  assert str(raised.value) == (
    f"run_fn in {module} reads fn_args.transform_output, but the pipeline has no Transform; "
    "define preprocessing_fn in the module (or pass --transform-module FILE) so the pipeline "
    "adds one."
  )


PICKLING_RUN_FN = textwrap.dedent("""
  import os
  import pickle


  def run_fn(fn_args):  # As TFX's experimental penguin_utils_sklearn.py: a pickle, no SavedModel.
    os.makedirs(fn_args.serving_model_dir, exist_ok=True)
    with open(os.path.join(fn_args.serving_model_dir, "model.pkl"), "wb") as f:
      pickle.dump({"weights": [1.0]}, f)
""")


@pytest.mark.parametrize(
  ("source", "wrote"),
  [
    (PICKLING_RUN_FN, "wrote model.pkl to"),
    ("def run_fn(fn_args):\n  pass\n", "finished without writing a model to"),
  ],
)
def test_a_run_fn_that_leaves_no_saved_model_names_the_fix(tmp_path, digits_csv, source, wrote):
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  module = tmp_path / "no_saved_model_module.py"
  module.write_text(source)
  with pytest.raises(UserInputError) as raised:
    executor.Executor().Do(inputs, outputs, _props(module_file=str(module), steps=1))
  message = str(raised.value)
  assert message.startswith(f"{module} {wrote} fn_args.serving_model_dir"), message
  assert message.endswith("tf.saved_model.save(model, fn_args.serving_model_dir)."), message


def test_a_copy_of_the_default_module_trains_as_the_default_does(tmp_path, digits_csv):
  # No private door: the copy, a user's module file, gets the data-sized plan too (its run_fn
  # plans its own steps), where an unmarked run_fn would get the stock 600 steps.
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  module = tmp_path / "my_tabular_module.py"
  module.write_text((REPO_ROOT / "models" / "tabular" / "module.py").read_text())
  props = _props(module_file=str(module), steps=0, custom_config={"hparams": {"max_epochs": 2}})
  executor.Executor().Do(inputs, outputs, props)
  props = _props_of(outputs[sc.MODEL_KEY][0])
  assert props[properties.MODULE_STYLE_PROPERTY].string_value == "tabular"
  assert props[properties.TRAINER_MODULE_PROPERTY].string_value == str(module)
  plan = json.loads(props[properties.TRAINING_PLAN_PROPERTY].string_value)
  assert plan["reason"].startswith("up to 2 epochs of ") and plan["epochs"] == 2
  # Epochs the run sets train at the usual rate, however few steps they make.
  assert "learning rate" not in plan["reason"]
  hparams = json.loads(props[properties.HPARAMS_PROPERTY].string_value)
  assert hparams["learning_rate"] == tabular_hparams.LEARNING_RATE


def test_do_rejects_module_without_run_fn_or_build_model(tmp_path, digits_csv):
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  module = tmp_path / "empty_module.py"
  module.write_text('"""Nothing to train."""\n')
  with pytest.raises(ValueError, match="neither run_fn"):
    executor.Executor().Do(inputs, outputs, _props(module_file=str(module)))
  assert not os.path.exists(os.path.join(outputs[sc.MODEL_KEY][0].uri, "Format-Serving"))


def test_do_rejects_unknown_label_with_fix(tmp_path, digits_csv):
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  props = _props(module_path=defaults.DEFAULT_MODULE_PATH, custom_config={"label_key": "digit"})
  with pytest.raises(UserInputError, match="label 'digit' is not a column of the data"):
    executor.Executor().Do(inputs, outputs, props)


def test_do_explicit_tpu_without_tpu_fails_with_clear_error(tmp_path, digits_csv, monkeypatch):
  for var in ("TPU_NAME", "TPU_WORKER_HOSTNAMES", "COLAB_TPU_ADDR"):
    monkeypatch.delenv(var, raising=False)
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  props = _props(module_path=defaults.DEFAULT_MODULE_PATH, **{constants.STRATEGY_KEY: "tpu"})
  with pytest.raises(ValueError, match="needs a reachable TPU"):
    executor.Executor().Do(inputs, outputs, props)


def test_a_profile_range_that_early_stopping_never_reaches_is_recorded(tmp_path):
  # The plan allows 30 steps, so --profile-steps 20,25 passes the up-front check; a held-out
  # loss that never improves (learning rate 0) stops training after epoch 2, at step 6.
  from components.distributed_trainer import strategy_lib, trainer_api

  built = strategy_lib.build_strategy("one_device", tf_config={}, tpu_available=False)
  with built.strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.0), loss="mse")
  rows = tf.data.Dataset.from_tensor_slices((np.ones((8, 2), "float32"), np.ones((8, 1))))
  config = trainer_api.FitConfig(
    model_run_dir=str(tmp_path / "model_run"),
    epochs=10,
    steps_per_epoch=3,
    global_batch_size=4,
    profile_steps=(20, 25),
    validation=rows.batch(4).repeat(),
    validation_steps=2,
    patience=1,
  )
  fit = trainer_api.fit(model, built, lambda _: rows.batch(4).repeat(), config)
  assert fit["epochs_run"] == 2
  assert fit["profile_dir"] is None
  assert fit["profile_skipped"] == (
    "--profile-steps 20,25 was never reached: early stopping ended training at step 6 (epoch 2 "
    "of 10); pass a range between 1 and 6 to profile this run."
  )
  assert not tf.io.gfile.exists(str(tmp_path / "model_run" / "logs" / "plugins" / "profile"))

  from tfx.types import standard_artifacts

  artifact = standard_artifacts.Model()
  artifact.uri = str(tmp_path / "model")
  result = trainer_api.TrainResult.under(built, "tabular", **fit)
  executor._record(artifact, result, num_workers=1, restarts=0)
  recorded = _props_of(artifact)[properties.PROFILE_SKIPPED_PROPERTY].string_value
  assert recorded == fit["profile_skipped"]
