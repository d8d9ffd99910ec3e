"""A trainer module that takes its settings from `fn_args.custom_config` and its strategy from
the trainer (`tf.distribute.get_strategy()`), as modules written for a configurable pipeline do.

Written for the stock TFX Trainer; the project never imports it. It reads the label and the
hidden width the pipeline puts in custom_config (`label_key`, and `hparams` from --hparams).
"""

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx import v1 as tfx
from tfx.utils import io_utils
from tfx_bsl.public import tfxio


# The TFX Trainer calls this function.
def run_fn(fn_args: tfx.components.FnArgs):
  config = fn_args.custom_config or {}
  label = config["label_key"]
  units = int((config.get("hparams") or {}).get("hidden_units", 8))
  schema = io_utils.parse_pbtxt_file(fn_args.schema_file, schema_pb2.Schema())
  features = sorted(f.name for f in schema.feature if f.name != label)

  def dataset(files):
    return fn_args.data_accessor.tf_dataset_factory(
      files, tfxio.TensorFlowDatasetOptions(batch_size=16, label_key=label), schema=schema
    ).repeat()

  # No strategy of its own: whatever the trainer chose is in effect here.
  strategy = tf.distribute.get_strategy()
  with strategy.scope():
    inputs = [tf.keras.layers.Input(shape=(1,), name=name) for name in features]
    x = tf.keras.layers.Dense(units, activation="relu")(tf.keras.layers.concatenate(inputs))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(3, activation="softmax")(x))
    model.compile(
      optimizer=tf.keras.optimizers.Adam(1e-2),
      loss="sparse_categorical_crossentropy",
      metrics=["sparse_categorical_accuracy"],
    )
  model.fit(
    dataset(fn_args.train_files),
    steps_per_epoch=fn_args.train_steps,
    validation_data=dataset(fn_args.eval_files),
    validation_steps=fn_args.eval_steps,
  )
  spec = {name: tf.io.FixedLenFeature([1], tf.float32) for name in features}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
  def serve(serialized):
    return model(tf.io.parse_example(serialized, spec))

  model.save(fn_args.serving_model_dir, save_format="tf", signatures={"serving_default": serve})
