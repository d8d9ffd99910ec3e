"""A trainer module with its own training loop: its own strategy, `strategy.run` per step.

Written for the stock TFX Trainer, the way TensorFlow's custom-training-loop guide distributes
a loop: `experimental_distribute_dataset`, a replica step under `strategy.run`, the loss
reduced across replicas. The project never imports it.
"""

import tensorflow as tf
from tfx import v1 as tfx
from tfx_bsl.public import tfxio

FEATURES = ["culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"]
LABEL = "species"
GLOBAL_BATCH = 32


def _features(batch):
  return tf.concat([tf.cast(batch[name], tf.float32) for name in FEATURES], axis=1)


# The TFX Trainer calls this function.
def run_fn(fn_args: tfx.components.FnArgs):
  from tensorflow_metadata.proto.v0 import schema_pb2
  from tfx.utils import io_utils

  schema = io_utils.parse_pbtxt_file(fn_args.schema_file, schema_pb2.Schema())
  strategy = tf.distribute.MirroredStrategy()
  dataset = fn_args.data_accessor.tf_dataset_factory(
    fn_args.train_files,
    tfxio.TensorFlowDatasetOptions(batch_size=GLOBAL_BATCH, label_key=LABEL),
    schema=schema,
  ).repeat()
  distributed = iter(strategy.experimental_distribute_dataset(dataset))
  with strategy.scope():
    model = tf.keras.Sequential(
      [
        tf.keras.Input((len(FEATURES),), name="features"),
        tf.keras.layers.Dense(16, activation="relu"),
        tf.keras.layers.Dense(3),
      ]
    )
    optimizer = tf.keras.optimizers.Adam(1e-2)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
      from_logits=True, reduction=tf.keras.losses.Reduction.NONE
    )

  def replica_step(batch):
    features, labels = batch
    with tf.GradientTape() as tape:
      logits = model(_features(features), training=True)
      per_example = loss_fn(labels, logits)
      loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss

  @tf.function
  def train_step(batch):
    losses = strategy.run(replica_step, args=(batch,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

  for _ in range(fn_args.train_steps):
    train_step(next(distributed))

  spec = {name: tf.io.FixedLenFeature([1], tf.float32) for name in FEATURES}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
  def serve(serialized):
    parsed = tf.io.parse_example(serialized, spec)
    return {"probabilities": tf.nn.softmax(model(_features(parsed)))}

  model.save(fn_args.serving_model_dir, save_format="tf", signatures={"serving_default": serve})
