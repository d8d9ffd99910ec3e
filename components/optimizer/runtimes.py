"""Runtimes that run one model format on named inputs and return its output as float32.

Every runtime takes a dict of arrays keyed by the model's input names (numbers as float32 or
int, text as bytes) and returns the model's first output, [batch, k], as float32. Each one
also describes its own input/output contract (names, order, dtypes, shapes and quantization),
which the Optimizer writes to the variant's signature.json.
"""

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
  """Runs one converted model on a dict of named input arrays."""

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
  """Number of rows in a dict of input arrays."""
  return len(next(iter(inputs.values())))


def take(inputs: Inputs, start: int, stop: int) -> Inputs:
  """Rows [start, stop) of every input."""
  return {k: v[start:stop] for k, v in inputs.items()}


def predict_batched(runtime: Runtime, inputs: Inputs, batch_size: int = MAX_BATCH) -> np.ndarray:
  """Runs `runtime` over all rows in chunks of at most `batch_size`; float32 [rows, k]."""
  n = rows(inputs)
  outputs = [
    runtime.predict(take(inputs, start, start + batch_size)) for start in range(0, n, batch_size)
  ]
  out = np.concatenate(outputs, axis=0).astype(np.float32)
  return out.reshape(len(out), -1)


def _as_feed(value: np.ndarray, dtype) -> np.ndarray:
  if value.dtype == object or dtype in (np.bytes_, np.object_, object):
    return np.asarray(value, dtype=object)
  return np.ascontiguousarray(value, dtype=dtype)


class KerasRuntime(Runtime):
  """A Keras model run by TensorFlow through a traced `tf.function` (no Python layer calls)."""

  name = "tensorflow"

  def __init__(self, model):
    self._model = model
    specs = {
      t.name.split(":")[0]: tf.TensorSpec(t.shape, t.dtype, name=t.name.split(":")[0])
      for t in model.inputs
    }
    self._specs = specs
    # A traced function measures TensorFlow's graph runtime, not eager per-layer Python calls,
    # so latency comparisons against TFLite and ONNX Runtime are fair. Keras layers need no
    # autograph, and transpiling them would cost seconds per model on a small CPU.
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


class SavedModelRuntime(Runtime):
  """One signature of a SavedModel, loaded with `tf.saved_model.load` alone.

  No Keras and none of this project's code is needed to load it: that is what a client of the
  serving folder has, so the variant is measured the way it will be called.
  """

  name = "tensorflow"

  def __init__(self, path: str, signature_key: str):
    self._loaded = tf.saved_model.load(path)
    self._key = signature_key
    self._fn = self._loaded.signatures[signature_key]
    self._specs = dict(self._fn.structured_input_signature[1])
    self._output = sorted(self._fn.structured_outputs)[0]

  def predict(self, batch: Inputs) -> np.ndarray:
    feed = {k: tf.constant(batch[k], dtype=s.dtype) for k, s in self._specs.items()}
    return self._fn(**feed)[self._output].numpy()

  def signature(self) -> dict[str, Any]:
    return {
      "signature_key": self._key,
      "inputs": [
        {"name": k, "dtype": s.dtype.name, "shape": [-1 if d is None else d for d in s.shape]}
        for k, s in self._specs.items()
      ],
      "outputs": [{"name": self._output, "dtype": "float32"}],
    }

  def close(self) -> None:
    self._fn = None
    self._loaded = None


def _quantize(x: np.ndarray, detail: dict) -> np.ndarray:
  """Maps float input onto a quantized input tensor using its scale and zero point."""
  dtype = detail["dtype"]
  if dtype in (np.float32, np.bytes_, np.object_) or x.dtype == object:
    return _as_feed(x, dtype)
  scale, zero_point = detail["quantization"]
  if not scale:
    return x.astype(dtype)
  info = np.iinfo(dtype)
  return np.clip(np.round(x / scale + zero_point), info.min, info.max).astype(dtype)


def _dequantize(y: np.ndarray, detail: dict) -> np.ndarray:
  """Maps a quantized output tensor back to float using its scale and zero point."""
  if detail["dtype"] == np.float32:
    return y.astype(np.float32)
  scale, zero_point = detail["quantization"]
  return ((y.astype(np.float32) - zero_point) * scale).astype(np.float32)


def _detail(name: str, detail: dict) -> dict[str, Any]:
  scale, zero_point = detail.get("quantization", (0.0, 0))
  entry = {
    "name": name,
    "dtype": np.dtype(detail["dtype"]).name if detail["dtype"] is not np.bytes_ else "string",
    "shape": [int(d) for d in detail.get("shape_signature", detail.get("shape", []))],
  }
  if scale:
    entry["quantization"] = {"scale": float(scale), "zero_point": int(zero_point)}
  return entry


class TFLiteRuntime(Runtime):
  """A .tflite model run by `tf.lite.Interpreter` through its signature runner.

  Quantized (int8) inputs are quantized from float with their scale and zero point, and
  quantized outputs dequantized, so callers always feed and read floats.
  """

  name = "tflite"

  def __init__(self, tflite_path: str, num_threads: int | None = None):
    self._interpreter = tf.lite.Interpreter(model_path=tflite_path, num_threads=num_threads)
    self._runner = self._interpreter.get_signature_runner()
    self._inputs = self._runner.get_input_details()
    self._outputs = self._runner.get_output_details()
    self._output_name = sorted(self._outputs)[0]

  @property
  def input_details(self) -> dict[str, dict]:
    """Signature input name -> detail (dtype, quantization)."""
    return self._inputs

  @property
  def output_detail(self) -> dict:
    """The first output's detail."""
    return self._outputs[self._output_name]

  def predict(self, batch: Inputs) -> np.ndarray:
    feed = {k: _quantize(np.asarray(batch[k]), d) for k, d in self._inputs.items()}
    out = self._runner(**feed)[self._output_name]
    return _dequantize(out, self.output_detail)

  def signature(self) -> dict[str, Any]:
    # Order of the interpreter's input tensors, which is what index-based clients use.
    by_index = sorted(self._inputs.items(), key=lambda kv: kv[1]["index"])
    return {
      "signature_key": "serving_default",
      "inputs": [_detail(k, d) for k, d in by_index],
      "outputs": [_detail(k, d) for k, d in sorted(self._outputs.items())],
    }

  def close(self) -> None:
    self._runner = None
    self._interpreter = None


def _text(value) -> str:
  return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class OnnxRuntime(Runtime):
  """An .onnx model run by onnxruntime on the CPU execution provider."""

  name = "onnxruntime"

  def __init__(self, onnx_path: str):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    self._session = onnxruntime.InferenceSession(
      onnx_path, sess_options=options, providers=["CPUExecutionProvider"]
    )
    self._inputs = self._session.get_inputs()

  def predict(self, batch: Inputs) -> np.ndarray:
    feed = {}
    for i in self._inputs:
      value = np.asarray(batch[i.name])
      if i.type == "tensor(string)":
        # onnxruntime takes Python str; TensorFlow and TFLite take bytes.
        feed[i.name] = np.vectorize(_text, otypes=[object])(value)
      elif i.type == "tensor(float)":
        feed[i.name] = _as_feed(value, np.float32)
      else:
        feed[i.name] = value
    return self._session.run(None, feed)[0].astype(np.float32)

  def signature(self) -> dict[str, Any]:
    def entry(arg):
      dtype = arg.type.removeprefix("tensor(").removesuffix(")")
      shape = [d if isinstance(d, int) else -1 for d in arg.shape]
      return {"name": arg.name, "dtype": "float32" if dtype == "float" else dtype, "shape": shape}

    return {
      "inputs": [entry(i) for i in self._inputs],
      "outputs": [entry(o) for o in self._session.get_outputs()],
    }

  def close(self) -> None:
    self._session = None
