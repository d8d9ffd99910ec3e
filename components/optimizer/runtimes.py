"""Runtimes that run one model format on a float32 batch and return class probabilities."""

import abc
import gc

import numpy as np
import tensorflow as tf

# Eval batches are fed in chunks of this many rows; TensorRT's optimization profile uses it
# as the largest batch it must accept.
MAX_BATCH = 256


class Runtime(abc.ABC):
  """Runs one converted model. `predict` takes float32 features, returns float32 probabilities."""

  name: str = "runtime"

  @abc.abstractmethod
  def predict(self, batch: np.ndarray) -> np.ndarray:
    """Returns class probabilities, shape [batch, num_classes], for a float32 batch."""

  def close(self) -> None:  # noqa: B027 - optional hook, most runtimes hold nothing native.
    """Releases native resources; the runtime must not be used afterwards."""

  def __enter__(self) -> "Runtime":
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()


def predict_batched(runtime: Runtime, x: np.ndarray, batch_size: int = MAX_BATCH) -> np.ndarray:
  """Runs `runtime` over `x` in chunks of at most `batch_size` rows.

  Args:
    runtime: the runtime to run.
    x: float32 features, shape [rows, num_features].
    batch_size: rows per call.

  Returns:
    float32 probabilities, shape [rows, num_classes].
  """
  outputs = [
    runtime.predict(x[start : start + batch_size]) for start in range(0, len(x), batch_size)
  ]
  return np.concatenate(outputs, axis=0).astype(np.float32)


class KerasRuntime(Runtime):
  """A Keras h5 model run by TensorFlow through a traced `tf.function` (no Python layer calls)."""

  name = "tensorflow"

  def __init__(self, h5_path: str):
    self._model = tf.keras.models.load_model(h5_path, compile=False)
    num_features = int(self._model.inputs[0].shape[-1])
    spec = tf.TensorSpec([None, num_features], tf.float32)
    # A traced function measures TensorFlow's graph runtime, not eager per-layer Python calls,
    # so latency comparisons against TFLite and ONNX Runtime are fair. Keras layers need no
    # autograph, and transpiling them would cost seconds per model on a small CPU.
    self._fn = tf.function(
      lambda x: self._model(x, training=False), input_signature=[spec], autograph=False
    )

  def predict(self, batch: np.ndarray) -> np.ndarray:
    return self._fn(tf.constant(batch, tf.float32)).numpy()

  def close(self) -> None:
    self._fn = None
    self._model = None
    gc.collect()


def _quantize(x: np.ndarray, detail: dict) -> np.ndarray:
  """Maps float input onto a quantized input tensor using its scale and zero point."""
  dtype = detail["dtype"]
  if dtype == np.float32:
    return x.astype(np.float32)
  scale, zero_point = detail["quantization"]
  if not scale:
    raise ValueError(f"Quantized input tensor {detail['name']!r} has no scale.")
  info = np.iinfo(dtype)
  return np.clip(np.round(x / scale + zero_point), info.min, info.max).astype(dtype)


def _dequantize(y: np.ndarray, detail: dict) -> np.ndarray:
  """Maps a quantized output tensor back to float using its scale and zero point."""
  if detail["dtype"] == np.float32:
    return y.astype(np.float32)
  scale, zero_point = detail["quantization"]
  return ((y.astype(np.float32) - zero_point) * scale).astype(np.float32)


class TFLiteRuntime(Runtime):
  """A .tflite model run by `tf.lite.Interpreter`; quantizes int8 inputs, dequantizes outputs."""

  name = "tflite"

  def __init__(self, tflite_path: str, num_threads: int | None = None):
    self._interpreter = tf.lite.Interpreter(model_path=tflite_path, num_threads=num_threads)
    self._interpreter.allocate_tensors()
    self._batch_rows = None
    self._refresh_details()

  def _refresh_details(self) -> None:
    self._input = self._interpreter.get_input_details()[0]
    self._output = self._interpreter.get_output_details()[0]

  @property
  def input_detail(self) -> dict:
    """The interpreter's input tensor detail (dtype, quantization)."""
    return self._input

  @property
  def output_detail(self) -> dict:
    """The interpreter's output tensor detail (dtype, quantization)."""
    return self._output

  def predict(self, batch: np.ndarray) -> np.ndarray:
    rows = batch.shape[0]
    if rows != self._batch_rows:
      # Resizing reallocates tensors, so it happens only when the batch size changes; the
      # timed batch-1 loop runs without it.
      self._interpreter.resize_tensor_input(self._input["index"], list(batch.shape), strict=False)
      self._interpreter.allocate_tensors()
      self._refresh_details()
      self._batch_rows = rows
    self._interpreter.set_tensor(self._input["index"], _quantize(batch, self._input))
    self._interpreter.invoke()
    return _dequantize(self._interpreter.get_tensor(self._output["index"]), self._output)

  def close(self) -> None:
    self._interpreter = None
    gc.collect()


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
    self._input_name = self._session.get_inputs()[0].name

  def predict(self, batch: np.ndarray) -> np.ndarray:
    feed = {self._input_name: np.ascontiguousarray(batch, dtype=np.float32)}
    return self._session.run(None, feed)[0].astype(np.float32)

  def close(self) -> None:
    self._session = None
    gc.collect()
