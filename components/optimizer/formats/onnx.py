"""The `onnx` format: tf2onnx export, checked against TensorFlow, run by onnxruntime on CPU."""

from __future__ import annotations

import os
import shutil
from typing import Any

import numpy as np
import tensorflow as tf

from components.optimizer import formats
from components.optimizer.formats import runtime_base
from components.optimizer.formats.variant_base import Conversion, ConversionContext, Variant
from core import defaults

ONNX_OPSET = 17


def to_onnx(model: tf.keras.Model, onnx_path: str) -> dict[str, Any]:
  """Exports a Keras model to ONNX (opset ONNX_OPSET), inputs named as the model's.

  Args:
    model: the Keras model.
    onnx_path: the .onnx file to write.

  Returns:
    {"opset": ...}.
  """
  tf2onnx = formats.backend("tf2onnx", "tf2onnx")
  signature = list(runtime_base.model_specs(model).values())
  tf2onnx.convert.from_keras(
    model, input_signature=signature, opset=ONNX_OPSET, output_path=onnx_path
  )
  return {"opset": ONNX_OPSET}


def _text(value) -> str:
  return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class OnnxRuntime(runtime_base.Runtime):
  """An .onnx model run by onnxruntime on the CPU execution provider."""

  name = "onnxruntime"

  def __init__(self, onnx_path: str):
    onnxruntime = formats.backend("onnxruntime", "onnxruntime")
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    self._session = onnxruntime.InferenceSession(
      onnx_path, sess_options=options, providers=["CPUExecutionProvider"]
    )
    self._inputs = self._session.get_inputs()

  def predict(self, batch: runtime_base.Inputs) -> np.ndarray:
    feed = {}
    for i in self._inputs:
      value = np.asarray(batch[i.name])
      if i.type == "tensor(string)":
        # onnxruntime takes Python str; TensorFlow and TFLite take bytes.
        feed[i.name] = np.vectorize(_text, otypes=[object])(value)
      elif i.type == "tensor(float)":
        feed[i.name] = runtime_base.as_feed(value, np.float32)
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


def max_gap(outputs: np.ndarray, reference: np.ndarray) -> float:
  """The largest absolute difference between two runtimes' outputs (0 when there are none).

  NaN on both sides of a cell is agreement (the model itself gives no number there); NaN on
  one side only is an infinite gap.
  """
  both_nan = np.isnan(outputs) & np.isnan(reference)
  gap = np.where(both_nan, 0.0, np.nan_to_num(np.abs(outputs - reference), nan=np.inf))
  return float(np.max(gap)) if gap.size else 0.0


def onnx_parity(
  onnx_path: str, eval_inputs: runtime_base.Inputs, reference: np.ndarray, tolerance: float
) -> dict:
  """Runs an ONNX model with onnxruntime on the CPU and compares it with TensorFlow's output.

  Args:
    onnx_path: the .onnx file.
    eval_inputs: the rows to run.
    reference: TensorFlow's outputs on those rows.
    tolerance: the largest absolute difference that passes.

  Returns:
    {"max_abs_diff", "rows", "tolerance", "passed"}.
  """
  with OnnxRuntime(onnx_path) as runtime:
    outputs = runtime_base.predict_batched(runtime, eval_inputs)
  max_abs_diff = max_gap(outputs, reference)
  return {
    "max_abs_diff": max_abs_diff,
    "rows": len(outputs),
    "tolerance": tolerance,
    "passed": max_abs_diff <= tolerance,
  }


def checked_onnx(context: ConversionContext) -> tuple[str, dict]:
  """The baseline's ONNX export (made once per run), checked against TensorFlow.

  `onnx` ships it and `tensorrt_fp16` builds its engine from it.

  Args:
    context: the run's conversion context.

  Returns:
    (the .onnx path, export details with the parity check).

  Raises:
    RuntimeError: when the export's outputs do not match TensorFlow's.
  """

  def export() -> tuple[str, dict]:
    path = os.path.join(context.scratch_dir, "baseline.onnx")
    return path, to_onnx(context.load_baseline(), path)

  path, details = context.shared("onnx/baseline", export)
  reference = context.baseline_eval_outputs
  # Parity is relative to the output's scale (a regression value may be in the thousands).
  finite = np.abs(reference[np.isfinite(reference)])
  scale = max(1.0, float(np.max(finite))) if finite.size else 1.0
  tolerance = context.config.onnx_parity_tolerance * scale
  parity = onnx_parity(path, context.eval_inputs, reference, tolerance)
  if not parity["passed"]:
    raise RuntimeError(
      f"ONNX parity check failed: max abs diff {parity['max_abs_diff']:.3g} against TensorFlow "
      f"exceeds {parity['tolerance']:.3g}."
    )
  return path, {**details, "onnx_parity": parity}


# Contract kinds of the default model's columns it reads with TensorFlow string ops: dates and
# numbers written as text it parses, free text it cuts into words.
PARSED_TEXT_KINDS = ("date", "free_text", "text_number")


def parsed_text_columns(context: ConversionContext) -> list[str]:
  """The default model's columns it parses from text with TensorFlow string ops.

  Args:
    context: the run's conversion context (its model contract, if any).

  Returns:
    The columns' names; [] for a model without a contract.
  """
  if context.contract is None:
    return []
  return [
    c["column"]
    for i in context.contract.inputs
    for c in i["columns"]
    if c["kind"] in PARSED_TEXT_KINDS
  ]


@formats.register
class OnnxVariant(Variant):
  """The baseline exported with tf2onnx, checked and run by onnxruntime on CPU."""

  name = defaults.ONNX
  runtime = OnnxRuntime.name

  def skip_reason(self, context: ConversionContext) -> str | None:
    parsed = parsed_text_columns(context)
    if parsed:
      return (
        f"the model parses the column(s) {parsed} from text (dates, numbers, words), and ONNX "
        "has no ops for that; serve a tflite variant"
      )
    return None

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    path, details = checked_onnx(context)
    shutil.copyfile(path, os.path.join(out_dir, "model.onnx"))
    return Conversion(["model.onnx"], details)

  def load(self, out_dir: str, conversion: Conversion) -> runtime_base.Runtime:
    return OnnxRuntime(os.path.join(out_dir, conversion.model_files[0]))
