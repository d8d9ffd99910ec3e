"""A trainer module in the style of TFX's penguin "simple" example (no Transform).

Written for the stock TFX Trainer: a fixed feature spec, datasets that are not repeated (so
the epochs come from `fn_args.train_steps`), its own MirroredStrategy, and a Keras SavedModel
with a serving signature over serialized tf.Examples. The project never imports it.
"""

import tensorflow as tf
from tensorflow_transform.tf_metadata import schema_utils
from tfx import v1 as tfx
from tfx_bsl.public import tfxio

FEATURES = ["culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"]
LABEL = "species"
TRAIN_BATCH = 20
EVAL_BATCH = 10
# Rows per epoch this module assumes, as TFX's example hard-codes its split sizes.
TRAIN_ROWS = 220

SPEC = {
  **{name: tf.io.FixedLenFeature([1], tf.float32) for name in FEATURES},
  LABEL: tf.io.FixedLenFeature([1], tf.int64),
}


def _dataset(files, data_accessor, schema, batch_size):
  return data_accessor.tf_dataset_factory(
    files, tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=LABEL), schema=schema
  )


def _model():
  inputs = [tf.keras.layers.Input(shape=(1,), name=name) for name in FEATURES]
  x = tf.keras.layers.concatenate(inputs)
  for _ in range(2):
    x = tf.keras.layers.Dense(8, activation="relu")(x)
  outputs = tf.keras.layers.Dense(3, activation="softmax")(x)
  model = tf.keras.Model(inputs=inputs, outputs=outputs)
  model.compile(
    optimizer=tf.keras.optimizers.Adam(1e-2),
    loss="sparse_categorical_crossentropy",
    metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
  )
  return model


# The TFX Trainer calls this function.
def run_fn(fn_args: tfx.components.FnArgs):
  # Seeded, so the test's accuracy bar does not rest on a draw: this 8-unit network at a 1e-2
  # learning rate once settled on the majority class (accuracy 0.4026, in CI on 2026-11-26).
  tf.keras.utils.set_random_seed(0)
  schema = schema_utils.schema_from_feature_spec(SPEC)
  train = _dataset(fn_args.train_files, fn_args.data_accessor, schema, TRAIN_BATCH)
  evaluation = _dataset(fn_args.eval_files, fn_args.data_accessor, schema, EVAL_BATCH)
  strategy = tf.distribute.MirroredStrategy()
  with strategy.scope():
    model = _model()
  steps_per_epoch = TRAIN_ROWS // TRAIN_BATCH
  model.fit(
    train,
    epochs=max(1, fn_args.train_steps // steps_per_epoch),
    steps_per_epoch=steps_per_epoch,
    validation_data=evaluation,
    validation_steps=fn_args.eval_steps,
    callbacks=[tf.keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir)],
  )

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
  def serve(serialized):
    spec = {k: v for k, v in SPEC.items() if k != LABEL}
    return model(tf.io.parse_example(serialized, spec))

  model.save(fn_args.serving_model_dir, save_format="tf", signatures={"serving_default": serve})
