"""A module with preprocessing_fn, tuner_fn and run_fn, written the way TFX's penguin example is.

The project never imports it; tests hand it to the pipeline unchanged. The data is iris, with
the four measurements and a string `species` label.
"""

from typing import List

import keras_tuner
import tensorflow as tf
import tensorflow_transform as tft
from tfx import v1 as tfx
from tfx_bsl.public import tfxio

_FEATURE_KEYS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
_LABEL_KEY = "species"
_TRAIN_BATCH_SIZE = 20
_EVAL_BATCH_SIZE = 10


def _transformed_name(key: str) -> str:
  return key + "_xf"


# TFX Transform will call this function.
def preprocessing_fn(inputs):
  outputs = {}
  for key in _FEATURE_KEYS:
    outputs[_transformed_name(key)] = tft.scale_to_z_score(inputs[key])
  outputs[_transformed_name(_LABEL_KEY)] = tft.compute_and_apply_vocabulary(inputs[_LABEL_KEY])
  return outputs


def _get_serve_tf_examples_fn(model, tf_transform_output):
  model.tft_layer = tf_transform_output.transform_features_layer()

  @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
  def serve_tf_examples_fn(serialized_tf_examples):
    feature_spec = tf_transform_output.raw_feature_spec()
    feature_spec.pop(_LABEL_KEY)
    parsed_features = tf.io.parse_example(serialized_tf_examples, feature_spec)
    transformed_features = model.tft_layer(parsed_features)
    return model(transformed_features)

  return serve_tf_examples_fn


def _get_transform_features_signature(model, tf_transform_output):
  model.tft_layer_eval = tf_transform_output.transform_features_layer()

  @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
  def transform_features_fn(serialized_tf_example):
    raw_feature_spec = tf_transform_output.raw_feature_spec()
    raw_features = tf.io.parse_example(serialized_tf_example, raw_feature_spec)
    return model.tft_layer_eval(raw_features)

  return transform_features_fn


def _input_fn(file_pattern: List[str], data_accessor, tf_transform_output, batch_size: int):
  return data_accessor.tf_dataset_factory(
    file_pattern,
    tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=_transformed_name(_LABEL_KEY)),
    tf_transform_output.transformed_metadata.schema,
  ).repeat()


def _get_hyperparameters() -> keras_tuner.HyperParameters:
  hp = keras_tuner.HyperParameters()
  hp.Choice("learning_rate", [1e-2, 3e-3], default=1e-2)
  hp.Int("num_layers", 1, 2, default=2)
  return hp


def _build_keras_model(hparams: keras_tuner.HyperParameters) -> tf.keras.Model:
  inputs = [tf.keras.layers.Input(shape=(1,), name=_transformed_name(f)) for f in _FEATURE_KEYS]
  d = tf.keras.layers.concatenate(inputs)
  for _ in range(int(hparams.get("num_layers"))):
    d = tf.keras.layers.Dense(8, activation="relu")(d)
  outputs = tf.keras.layers.Dense(3)(d)
  model = tf.keras.Model(inputs=inputs, outputs=outputs)
  model.compile(
    optimizer=tf.keras.optimizers.Adam(hparams.get("learning_rate")),
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
  )
  return model


# TFX Tuner will call this function.
def tuner_fn(fn_args: tfx.components.FnArgs) -> tfx.components.TunerFnResult:
  tuner = keras_tuner.RandomSearch(
    _build_keras_model,
    max_trials=int((fn_args.custom_config or {}).get("tune_trials", 6)),
    hyperparameters=_get_hyperparameters(),
    allow_new_entries=False,
    objective=keras_tuner.Objective("val_sparse_categorical_accuracy", "max"),
    directory=fn_args.working_dir,
    project_name="iris_tuning",
  )
  tf_transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
  train_dataset = _input_fn(
    fn_args.train_files, fn_args.data_accessor, tf_transform_output, _TRAIN_BATCH_SIZE
  )
  eval_dataset = _input_fn(
    fn_args.eval_files, fn_args.data_accessor, tf_transform_output, _EVAL_BATCH_SIZE
  )
  return tfx.components.TunerFnResult(
    tuner=tuner,
    fit_kwargs={
      "x": train_dataset,
      "validation_data": eval_dataset,
      "steps_per_epoch": fn_args.train_steps,
      "validation_steps": fn_args.eval_steps,
    },
  )


# TFX Trainer will call this function.
def run_fn(fn_args: tfx.components.FnArgs):
  tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
  train_dataset = _input_fn(
    fn_args.train_files, fn_args.data_accessor, tf_transform_output, _TRAIN_BATCH_SIZE
  )
  eval_dataset = _input_fn(
    fn_args.eval_files, fn_args.data_accessor, tf_transform_output, _EVAL_BATCH_SIZE
  )
  if fn_args.hyperparameters:
    hparams = keras_tuner.HyperParameters.from_config(fn_args.hyperparameters)
  else:
    hparams = _get_hyperparameters()
  model = _build_keras_model(hparams)
  model.fit(
    train_dataset,
    steps_per_epoch=fn_args.train_steps,
    validation_data=eval_dataset,
    validation_steps=fn_args.eval_steps,
  )
  signatures = {
    "serving_default": _get_serve_tf_examples_fn(model, tf_transform_output),
    "transform_features": _get_transform_features_signature(model, tf_transform_output),
  }
  model.save(fn_args.serving_model_dir, save_format="tf", signatures=signatures)
