"""Stock TFX Trainer module for the digits data, used by the stock-pipeline benchmark.

The same network as this project's default model on digits, written the way TFX's examples
write modules: inputs standardized inside the model (a Normalization layer adapted on the
training split, as our model standardizes with the training split's mean and deviation), one
hidden ReLU layer of 256 units, a 10-way softmax, Adam at 1e-3, batch 64 and the Trainer's
train steps. It reads the gzipped TFRecords itself, so the stock pipeline needs no schema:
CsvExampleGen, Trainer, Pusher. Keras defaults otherwise (one step per execution, one epoch).
"""

import tensorflow as tf
from tfx import v1 as tfx

_LABEL_KEY = "label"
_FEATURES = [f"pixel_{i}" for i in range(64)]
_BATCH_SIZE = 64
_HIDDEN_UNITS = 256
_LEARNING_RATE = 1e-3
_SPEC = {k: tf.io.FixedLenFeature([], tf.int64) for k in [*_FEATURES, _LABEL_KEY]}


def _to_dense(parsed):
  x = tf.stack([tf.cast(parsed[k], tf.float32) for k in _FEATURES], axis=1)
  return x, parsed[_LABEL_KEY]


def _dataset(patterns, *, training: bool):
  files = tf.data.Dataset.list_files(patterns, shuffle=training)
  ds = tf.data.TFRecordDataset(files, compression_type="GZIP")
  if training:
    ds = ds.shuffle(2048).repeat()
  ds = ds.batch(_BATCH_SIZE)
  return ds.map(lambda s: _to_dense(tf.io.parse_example(s, _SPEC))).prefetch(2)


# TFX Trainer will call this function.
def run_fn(fn_args: tfx.components.FnArgs):
  normalize = tf.keras.layers.Normalization(axis=-1)
  normalize.adapt(_dataset(fn_args.train_files, training=False).map(lambda x, _: x))
  inputs = tf.keras.Input(shape=(len(_FEATURES),), dtype=tf.float32)
  x = normalize(inputs)
  x = tf.keras.layers.Dense(_HIDDEN_UNITS, activation="relu")(x)
  outputs = tf.keras.layers.Dense(10, activation="softmax")(x)
  model = tf.keras.Model(inputs, outputs)
  model.compile(
    tf.keras.optimizers.Adam(_LEARNING_RATE), "sparse_categorical_crossentropy", ["accuracy"]
  )
  history = model.fit(
    _dataset(fn_args.train_files, training=True),
    steps_per_epoch=fn_args.train_steps,
    validation_data=_dataset(fn_args.eval_files, training=False),
    validation_steps=fn_args.eval_steps or None,
  )
  spec = {k: _SPEC[k] for k in _FEATURES}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
  def serve(serialized):
    parsed = tf.io.parse_example(serialized, spec)
    return {"outputs": model(tf.stack([tf.cast(parsed[k], tf.float32) for k in _FEATURES], 1))}

  model.save(fn_args.serving_model_dir, save_format="tf", signatures={"serving_default": serve})
  # For the benchmark's report: the eval accuracy the stock pipeline reached.
  with tf.io.gfile.GFile(f"{fn_args.model_run_dir}/eval_accuracy.txt", "w") as f:
    f.write(str(history.history["val_accuracy"][-1]))
