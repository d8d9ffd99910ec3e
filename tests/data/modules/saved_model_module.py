"""A trainer module that exports with `tf.saved_model.save` instead of Keras' `model.save`.

Written for the stock TFX Trainer; the project never imports it. The export is a plain
SavedModel (no Keras config): a serving signature over serialized tf.Examples.
"""

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx import v1 as tfx
from tfx.utils import io_utils
from tfx_bsl.public import tfxio

FEATURES = ["culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"]
LABEL = "species"


# The TFX Trainer calls this function.
def run_fn(fn_args: tfx.components.FnArgs):
  schema = io_utils.parse_pbtxt_file(fn_args.schema_file, schema_pb2.Schema())

  def dataset(files):
    return fn_args.data_accessor.tf_dataset_factory(
      files, tfxio.TensorFlowDatasetOptions(batch_size=20, label_key=LABEL), schema=schema
    ).repeat()

  inputs = {name: tf.keras.layers.Input(shape=(1,), name=name) for name in FEATURES}
  x = tf.keras.layers.concatenate(list(inputs.values()))
  x = tf.keras.layers.Dense(12, activation="relu")(x)
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(x))
  model.compile(
    optimizer=tf.keras.optimizers.Adam(1e-2),
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
  )
  model.fit(
    dataset(fn_args.train_files),
    steps_per_epoch=fn_args.train_steps,
    validation_data=dataset(fn_args.eval_files),
    validation_steps=fn_args.eval_steps,
  )
  spec = {name: tf.io.FixedLenFeature([1], tf.float32) for name in FEATURES}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
  def serve(serialized):
    return {"outputs": model(tf.io.parse_example(serialized, spec))}

  tf.saved_model.save(model, fn_args.serving_model_dir, signatures={"serving_default": serve})
