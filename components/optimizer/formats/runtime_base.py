"""The Runtime interface every format implements, batching helpers, and the baseline's runtime."""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
import tensorflow as tf

# Eval batches are fed in chunks of this many rows; TensorRT's optimization profile uses it as
# the largest batch it must accept.
MAX_BATCH = 256

Inputs = dict[str, np.ndarray]


class Runtime(abc.ABC):
  """Runs one converted model on a dict of named input arrays.

  Inputs are keyed by the model's input names (numbers as float32 or int, text as bytes); the
  result is the model's first output, [batch, k], as float32. Each runtime also describes its
  own input/output contract (names, order, dtypes, shapes, quantization), which the Optimizer
  writes to the variant's signature.json.
  """

  name: str = "runtime"

  @abc.abstractmethod
  def predict(self, batch: Inputs) -> np.ndarray:
    """Returns the model's first output, [batch, k] float32."""

  def signature(self) -> dict[str, Any]:
    """Inputs and outputs in the runtime's own order: name, dtype, shape, quantization."""
    return {}

  def close(self) -> None:  # noqa: B027 - optional hook; most runtimes hold nothing native.
    """Releases native resources; the runtime must not be used afterwards."""

  def __enter__(self) -> Runtime:
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()


def rows(inputs: Inputs) -> int:
  """Number of rows in a dict of input arrays.

  Args:
    inputs: input name -> array, all with the same number of rows.

  Returns:
    That number.
  """
  return len(next(iter(inputs.values())))


def take(inputs: Inputs, start: int, stop: int) -> Inputs:
  """Rows [start, stop) of every input.

  Args:
    inputs: input name -> array.
    start: the first row.
    stop: the row after the last.

  Returns:
    Input name -> those rows.
  """
  return {k: v[start:stop] for k, v in inputs.items()}


def predict_batched(runtime: Runtime, inputs: Inputs, batch_size: int = MAX_BATCH) -> np.ndarray:
  """Runs `runtime` over all rows in chunks of at most `batch_size`.

  Args:
    runtime: the runtime to call.
    inputs: input name -> array, all with the same number of rows.
    batch_size: the most rows one call gets.

  Returns:
    The outputs as float32 [rows, k].
  """
  n = rows(inputs)
  outputs = [
    runtime.predict(take(inputs, start, start + batch_size)) for start in range(0, n, batch_size)
  ]
  out = np.concatenate(outputs, axis=0).astype(np.float32)
  return out.reshape(len(out), -1)


def as_feed(value: np.ndarray, dtype) -> np.ndarray:
  """An array as a native runtime takes it: text as objects, numbers contiguous in `dtype`.

  Args:
    value: the array fed.
    dtype: the dtype the runtime's input takes.

  Returns:
    The array to feed.
  """
  if value.dtype == object or dtype in (np.bytes_, np.object_, object):
    return np.asarray(value, dtype=object)
  return np.ascontiguousarray(value, dtype=dtype)


def model_specs(model) -> dict[str, tf.TensorSpec]:
  """A Keras model's inputs as specs named after the inputs, which the converters keep.

  Args:
    model: the Keras model.

  Returns:
    Input name -> TensorSpec (batch dimension None).
  """
  return {
    t.name.split(":")[0]: tf.TensorSpec(t.shape, t.dtype, name=t.name.split(":")[0])
    for t in model.inputs
  }


class KerasRuntime(Runtime):
  """A Keras model run by TensorFlow through a traced `tf.function` (no Python layer calls)."""

  name = "tensorflow"

  def __init__(self, model):
    self._model = model
    specs = model_specs(model)
    self._specs = specs
    # A traced function measures TensorFlow's graph runtime, not eager per-layer Python calls,
    # so latency comparisons against TFLite and ONNX Runtime are fair. Keras layers need no
    # autograph, so transpiling them would only add tracing time.
    self._fn = tf.function(
      lambda x: model(x, training=False), input_signature=[specs], autograph=False
    )

  def predict(self, batch: Inputs) -> np.ndarray:
    feed = {k: tf.constant(batch[k], dtype=s.dtype) for k, s in self._specs.items()}
    out = self._fn(feed)
    if isinstance(out, dict | list | tuple):
      out = next(iter(out.values())) if isinstance(out, dict) else out[0]
    return out.numpy()

  def signature(self) -> dict[str, Any]:
    return {
      "inputs": [
        # -1 for an unknown dimension, as the TFLite and ONNX runtimes write it.
        {"name": k, "dtype": s.dtype.name, "shape": [-1 if d is None else d for d in s.shape]}
        for k, s in self._specs.items()
      ],
      "outputs": [{"name": "output_0", "dtype": "float32"}],
    }

  def close(self) -> None:
    self._fn = None
    self._model = None
