"""A trainer module written for the stock TFX Trainer, as in TFX's penguin example.

The project never imports it; tests hand it to DistributedTrainer unchanged.
"""

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import schema_utils
from tfx import v1 as tfx
from tfx_bsl.public import tfxio

_LABEL_KEY = "diagnosis"
_BATCH_SIZE = 32


def _feature_keys(schema: schema_pb2.Schema) -> list[str]:
  return sorted(f.name for f in schema.feature if f.name != _LABEL_KEY)


def _input_fn(file_pattern, data_accessor, schema, batch_size):
  return data_accessor.tf_dataset_factory(
    file_pattern,
    tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=_LABEL_KEY),
    schema=schema,
  ).repeat()


def _build_keras_model(feature_keys: list[str], sample: tf.Tensor) -> tf.keras.Model:
  inputs = [tf.keras.layers.Input(shape=(1,), name=k) for k in feature_keys]
  d = tf.keras.layers.concatenate(inputs)
  norm = tf.keras.layers.Normalization()
  norm.adapt(sample)
  d = norm(d)
  d = tf.keras.layers.Dense(16, activation="relu")(d)
  outputs = tf.keras.layers.Dense(2, activation="softmax")(d)
  model = tf.keras.Model(inputs=inputs, outputs=outputs)
  model.compile(
    optimizer=tf.keras.optimizers.Adam(1e-2),
    loss="sparse_categorical_crossentropy",
    metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
  )
  return model


def _serve_fn(model, schema):
  feature_spec = schema_utils.schema_as_feature_spec(schema).feature_spec
  feature_spec.pop(_LABEL_KEY)

  @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name="examples")])
  def serve(serialized):
    features = tf.io.parse_example(serialized, feature_spec)
    return {"outputs": model({k: tf.cast(v, tf.float32) for k, v in features.items()})}

  return serve


# TFX Trainer will call this function.
def run_fn(fn_args: tfx.components.FnArgs):
  schema = tfx.utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
  train = _input_fn(fn_args.train_files, fn_args.data_accessor, schema, _BATCH_SIZE)
  evals = _input_fn(fn_args.eval_files, fn_args.data_accessor, schema, _BATCH_SIZE)
  keys = _feature_keys(schema)
  features, _ = next(iter(_input_fn(fn_args.train_files, fn_args.data_accessor, schema, 256)))
  sample = tf.concat([tf.cast(features[k], tf.float32) for k in keys], axis=1)
  model = _build_keras_model(keys, sample)
  model.fit(
    train,
    steps_per_epoch=fn_args.train_steps,
    validation_data=evals,
    validation_steps=fn_args.eval_steps,
  )
  model.save(
    fn_args.serving_model_dir,
    save_format="tf",
    signatures={"serving_default": _serve_fn(model, schema)},
  )
