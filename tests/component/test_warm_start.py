"""Warm start: a DistributedTrainer run with a base model begins from that model's weights."""

import json
import os
import textwrap

import numpy as np
import tensorflow as tf
from tfx.proto import trainer_pb2
from tfx.types import standard_component_specs as sc
from tfx.utils import json_utils, proto_utils

from components.distributed_trainer import constants, executor
from core import defaults, properties
from tests.support import example_files

# A module for the stock TFX Trainer that warm-starts the way stock modules do: it loads the
# SavedModel at `fn_args.base_model` (the base model's Format-Serving folder) and keeps training.
STOCK_WARM_START_MODULE = textwrap.dedent('''
  """Stock run_fn module: warm-starts from fn_args.base_model when the trainer passes one."""

  import json
  import os

  import tensorflow as tf
  from tensorflow_metadata.proto.v0 import schema_pb2
  from tensorflow_transform.tf_metadata import schema_utils
  from tfx import v1 as tfx
  from tfx_bsl.public import tfxio

  _LABEL_KEY = "label"


  def _serve_fn(model, schema):
    feature_spec = schema_utils.schema_as_feature_spec(schema).feature_spec
    feature_spec.pop(_LABEL_KEY)

    @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
    def serve(serialized):
      return {"outputs": model(tf.io.parse_example(serialized, feature_spec))}

    return serve


  def run_fn(fn_args: tfx.components.FnArgs):
    schema = tfx.utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
    train = fn_args.data_accessor.tf_dataset_factory(
        fn_args.train_files,
        tfxio.TensorFlowDatasetOptions(batch_size=64, label_key=_LABEL_KEY),
        schema=schema).repeat()
    keys = sorted(f.name for f in schema.feature if f.name != _LABEL_KEY)
    if fn_args.base_model:
      model = tf.keras.models.load_model(fn_args.base_model)
    else:
      tf.keras.utils.set_random_seed(1)
      inputs = {k: tf.keras.layers.Input(shape=(1,), name=k, dtype=tf.int64) for k in keys}
      x = tf.keras.layers.concatenate([tf.cast(inputs[k], tf.float32) / 16.0 for k in keys])
      x = tf.keras.layers.Dense(32, activation="relu")(x)
      model = tf.keras.Model(inputs, tf.keras.layers.Dense(10, activation="softmax")(x))
    model.compile(tf.keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy")
    model.fit(train, steps_per_epoch=fn_args.train_steps, verbose=0)
    model.save(fn_args.serving_model_dir, save_format="tf",
               signatures={"serving_default": _serve_fn(model, schema)})
    os.makedirs(fn_args.model_run_dir, exist_ok=True)
    with open(os.path.join(fn_args.model_run_dir, "base_model.json"), "w") as f:
      json.dump({"base_model": fn_args.base_model}, f)
''')


def _props(steps, module_file=None, module_path=None):
  return {
    sc.TRAIN_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.TrainArgs(num_steps=steps)),
    sc.EVAL_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.EvalArgs(num_steps=0)),
    sc.MODULE_FILE_KEY: module_file,
    sc.MODULE_PATH_KEY: module_path,
    sc.CUSTOM_CONFIG_KEY: json_utils.dumps(None),
    constants.STRATEGY_KEY: "auto",
    constants.LOCAL_WORKERS_KEY: 0,
    constants.LOCAL_PS_KEY: 0,
  }


def _train(root, digits_csv, props, base=None):
  """Runs Executor.Do on fresh digits Examples under root; returns (inputs, model artifact)."""
  inputs, outputs = example_files.trainer_artifacts(str(root), str(digits_csv))
  if base is not None:
    inputs[sc.BASE_MODEL_KEY] = [base]
  executor.Executor().Do(inputs, outputs, props)
  return inputs, outputs[sc.MODEL_KEY][0]


def _accuracy(model, inputs):
  """Accuracy of the model's serving signature on the whole eval split."""
  files = tf.io.gfile.glob(os.path.join(inputs[sc.EXAMPLES_KEY][0].uri, "Split-eval", "*"))
  records = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
  serve = tf.saved_model.load(os.path.join(model.uri, "Format-Serving")).signatures[
    "serving_default"
  ]
  probs = serve(examples=tf.constant(records))["outputs"].numpy()
  labels = [
    tf.train.Example.FromString(r).features.feature["label"].int64_list.value[0] for r in records
  ]
  return float(np.mean(probs.argmax(axis=1) == np.array(labels)))


def _keras_weights(model):
  from models.tabular import layers  # noqa: F401  (registers the layers)

  path = os.path.join(model.uri, "Format-Serving")
  return tf.keras.models.load_model(path, compile=False).get_weights()


def test_default_module_warm_start_begins_from_the_base_model_weights(tmp_path, digits_csv):
  props = _props(steps=300, module_path=defaults.DEFAULT_MODULE_PATH)
  base_inputs, base = _train(tmp_path / "base", digits_csv, props)
  base_accuracy = _accuracy(base, base_inputs)
  assert base_accuracy >= 0.9

  one_step = _props(steps=1, module_path=defaults.DEFAULT_MODULE_PATH)
  warm_inputs, warm = _train(tmp_path / "warm", digits_csv, one_step, base=base)
  cold_inputs, cold = _train(tmp_path / "cold", digits_csv, one_step)

  # One Adam step (learning rate 1e-3) moves each weight by about 1e-3: the warm run's weights
  # are the base model's, the cold run's are a fresh initialisation.
  base_w, warm_w, cold_w = _keras_weights(base), _keras_weights(warm), _keras_weights(cold)
  assert len(base_w) == len(warm_w) == len(cold_w)
  for b, w in zip(base_w, warm_w, strict=True):
    np.testing.assert_allclose(w, b, atol=5e-3)
  # A fresh initialisation is ten times further from the base model than that, somewhere.
  assert max(float(np.max(np.abs(c - b))) for b, c in zip(base_w, cold_w, strict=True)) > 0.05
  assert _accuracy(warm, warm_inputs) >= base_accuracy - 0.03
  assert _accuracy(cold, cold_inputs) < 0.5


def test_stock_run_fn_module_gets_the_base_model_serving_path(tmp_path, digits_csv):
  module = tmp_path / "stock_warm_start.py"
  module.write_text(STOCK_WARM_START_MODULE)
  base_inputs, base = _train(tmp_path / "base", digits_csv, _props(200, module_file=str(module)))
  base_accuracy = _accuracy(base, base_inputs)
  assert base_accuracy >= 0.9

  one_step = _props(steps=1, module_file=str(module))
  warm_inputs, warm = _train(tmp_path / "warm", digits_csv, one_step, base=base)
  with open(tmp_path / "warm" / "model_run" / "base_model.json") as f:
    assert json.load(f)["base_model"] == os.path.join(base.uri, "Format-Serving")
  assert _accuracy(warm, warm_inputs) >= base_accuracy - 0.03
  cold_inputs, cold = _train(tmp_path / "cold", digits_csv, one_step)
  assert _accuracy(cold, cold_inputs) < 0.5


def test_default_module_warm_start_keeps_the_base_models_width(tmp_path, digits_csv):
  # The width follows the training rows; a base of another width (here one set by hparams, as
  # a table grown past 2,000 rows would size it) is kept, so that its hidden layers carry over.
  props = _props(steps=50, module_path=defaults.DEFAULT_MODULE_PATH)
  props[sc.CUSTOM_CONFIG_KEY] = json_utils.dumps({"hparams": {"hidden_units": 32}})
  _, base = _train(tmp_path / "base", digits_csv, props)
  _, warm = _train(
    tmp_path / "warm", digits_csv, _props(1, module_path=defaults.DEFAULT_MODULE_PATH), base=base
  )
  from models.tabular import layers  # noqa: F401  (registers the layers)

  keras = tf.keras.models.load_model(os.path.join(warm.uri, "Format-Serving"), compile=False)
  assert keras.get_layer("hidden_0").units == 32
  plan = json.loads(warm.get_string_custom_property(properties.TRAINING_PLAN_PROPERTY))
  assert plan["warm_start"] == (
    "3 of 3 layers with weights copied from the base model; kept the base model's width of 32 "
    "units, where 1,438 training rows would size it 64 (--hparams hidden_units=64 resizes it)"
  )
