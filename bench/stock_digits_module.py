"""Stock TFX Trainer module for the digits data, used by the stock-pipeline benchmark.

Same network, batch size and steps as the project's default module, written the
way TFX's examples write modules. It reads the gzipped TFRecords itself, so the
stock pipeline needs no schema: CsvExampleGen, Trainer, Pusher.
"""

import tensorflow as tf
from tfx import v1 as tfx

_LABEL_KEY = "label"
_FEATURES = [f"pixel_{i}" for i in range(64)]
_BATCH_SIZE = 64
_SPEC = {k: tf.io.FixedLenFeature([], tf.int64) for k in [*_FEATURES, _LABEL_KEY]}


def _to_dense(parsed):
  x = tf.stack([tf.cast(parsed[k], tf.float32) for k in _FEATURES], axis=1)
  return x, parsed[_LABEL_KEY]


def _dataset(patterns):
  files = tf.data.Dataset.list_files(patterns, shuffle=True)
  ds = tf.data.TFRecordDataset(files, compression_type="GZIP")
  ds = ds.shuffle(2048).repeat().batch(_BATCH_SIZE)
  return ds.map(lambda s: _to_dense(tf.io.parse_example(s, _SPEC))).prefetch(2)


# TFX Trainer will call this function.
def run_fn(fn_args: tfx.components.FnArgs):
  inputs = tf.keras.Input(shape=(len(_FEATURES),), dtype=tf.float32)
  x = tf.keras.layers.Rescaling(1.0 / 16.0)(inputs)
  x = tf.keras.layers.Dense(64, activation="relu")(x)
  outputs = tf.keras.layers.Dense(10, activation="softmax")(x)
  model = tf.keras.Model(inputs, outputs)
  model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
  model.fit(
    _dataset(fn_args.train_files),
    steps_per_epoch=fn_args.train_steps,
    validation_data=_dataset(fn_args.eval_files),
    validation_steps=fn_args.eval_steps,
  )
  spec = {k: _SPEC[k] for k in _FEATURES}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
  def serve(serialized):
    parsed = tf.io.parse_example(serialized, spec)
    return {"outputs": model(tf.stack([tf.cast(parsed[k], tf.float32) for k in _FEATURES], 1))}

  model.save(fn_args.serving_model_dir, save_format="tf", signatures={"serving_default": serve})
