"""A tiny real SavedModel with the kit's serving signature, for the Pusher's tests."""

from __future__ import annotations

import pathlib


def write_saved_model(path: pathlib.Path | str, bias: float) -> str:
  """Saves a SavedModel whose `serving_default` maps serialized examples to 10 softmax outputs
  (`examples -> outputs`), every row the same, set by `bias`; returns `path`."""
  import tensorflow as tf

  class Tiny(tf.Module):
    def __init__(self):
      super().__init__()
      self.bias = tf.Variable(tf.fill([10], bias))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
      logits = tf.zeros([tf.shape(examples)[0], 10]) + self.bias
      return {"outputs": tf.nn.softmax(logits)}

  module = Tiny()
  tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
  return str(path)
