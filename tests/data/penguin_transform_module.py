"""A trainer module with preprocessing_fn and run_fn, written the way TFX's penguin example is.

The project never imports it; tests hand it to the pipeline unchanged. The data is iris, with
the four measurements and a string `species` label.
"""

from typing import List

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


def _build_keras_model() -> tf.keras.Model:
  inputs = [tf.keras.layers.Input(shape=(1,), name=_transformed_name(f)) for f in _FEATURE_KEYS]
  d = tf.keras.layers.concatenate(inputs)
  for _ in range(2):
    d = tf.keras.layers.Dense(8, activation="relu")(d)
  outputs = tf.keras.layers.Dense(3)(d)
  model = tf.keras.Model(inputs=inputs, outputs=outputs)
  model.compile(
    optimizer=tf.keras.optimizers.Adam(1e-2),
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
  )
  return model


# TFX Trainer will call this function.
def run_fn(fn_args: tfx.components.FnArgs):
  tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
  train_dataset = _input_fn(
    fn_args.train_files, fn_args.data_accessor, tf_transform_output, _TRAIN_BATCH_SIZE
  )
  eval_dataset = _input_fn(
    fn_args.eval_files, fn_args.data_accessor, tf_transform_output, _EVAL_BATCH_SIZE
  )
  model = _build_keras_model()
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
