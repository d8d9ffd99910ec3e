"""The `tensorrt_fp16` format: an FP16 TensorRT engine built from the checked ONNX export."""

from __future__ import annotations

import ctypes
import importlib.util
import os

import numpy as np

from components.optimizer import formats
from components.optimizer.formats import onnx as onnx_format
from components.optimizer.formats import runtime_base
from components.optimizer.formats.variant_base import Conversion, ConversionContext, Variant
from core import defaults
from core.errors import UserInputError

INSTALL = ".[tensorrt]"
INSTALL_HINT = f"tensorrt Python package not installed: pip install {INSTALL}"
PYCUDA_HINT = f"pycuda not installed: pip install {INSTALL}"
WORKSPACE_BYTES = 1 << 30


class TensorRTUnavailableError(UserInputError):
  """tensorrt='required' on a host without the tensorrt package or a CUDA GPU."""


def cuda_gpu_problem() -> str | None:
  """Checks through the CUDA driver API whether a CUDA GPU is visible to this process.

  Uses libcuda directly so the answer does not depend on which Python packages are installed
  (TensorFlow's pip wheel, for one, may not see a GPU that TensorRT can use).

  Returns:
    None if at least one device is visible, else a short reason.
  """
  try:
    libcuda = ctypes.CDLL("libcuda.so.1")
  except OSError:
    return "no CUDA GPU visible (NVIDIA driver library libcuda.so.1 not found)"
  status = libcuda.cuInit(0)
  if status != 0:
    return f"no CUDA GPU visible (cuInit returned CUDA error {status})"
  count = ctypes.c_int(0)
  status = libcuda.cuDeviceGetCount(ctypes.byref(count))
  if status != 0 or count.value == 0:
    return "no CUDA GPU visible (cuDeviceGetCount found no device)"
  return None


def unavailable_reason() -> str | None:
  """Says why a TensorRT engine cannot be built and run here, or None if it can.

  Returns:
    None when the `tensorrt` and `pycuda` packages are importable and a CUDA GPU is visible;
    otherwise every problem found, joined by "; ".
  """
  problems = []
  if importlib.util.find_spec("tensorrt") is None:
    problems.append(INSTALL_HINT)
  elif importlib.util.find_spec("pycuda") is None:
    problems.append(PYCUDA_HINT)
  gpu_problem = cuda_gpu_problem()
  if gpu_problem:
    problems.append(gpu_problem)
  return "; ".join(problems) or None


def check_required() -> None:
  """Fails before any work when tensorrt='required' on a host that cannot build engines.

  Raises:
    TensorRTUnavailableError: saying what is missing and what to pass instead.
  """
  reason = unavailable_reason()
  if reason:
    raise TensorRTUnavailableError(
      f"tensorrt='required' but {reason}; run on a CUDA host with TensorRT or pass tensorrt='auto'."
    )


def build_fp16_engine(
  onnx_path: str, plan_path: str, max_batch: int = runtime_base.MAX_BATCH
) -> dict:
  """Builds a serialized TensorRT engine from an ONNX model with the FP16 builder flag.

  Args:
    onnx_path: the ONNX model; every input is [batch, ...] with a dynamic batch dimension.
    plan_path: where to write the serialized engine.
    max_batch: the largest batch the engine's optimization profile accepts.

  Returns:
    Build details: TensorRT version and the optimization profile's batch range.

  Raises:
    RuntimeError: if TensorRT cannot parse the model or the build fails.
  """
  trt = formats.backend("tensorrt", INSTALL)
  logger = trt.Logger(trt.Logger.WARNING)
  builder = trt.Builder(logger)
  flags = 0
  # EXPLICIT_BATCH is required before TensorRT 10 and deprecated (always on) from 10.
  if hasattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH"):
    flags = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
  network = builder.create_network(flags)
  parser = trt.OnnxParser(network, logger)
  with open(onnx_path, "rb") as f:
    if not parser.parse(f.read()):
      errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
      raise RuntimeError(f"TensorRT could not parse {onnx_path}: {errors}")
  config = builder.create_builder_config()
  config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, WORKSPACE_BYTES)
  config.set_flag(trt.BuilderFlag.FP16)
  profile = builder.create_optimization_profile()
  for i in range(network.num_inputs):
    tensor = network.get_input(i)
    row = tuple(int(d) for d in tensor.shape[1:])
    profile.set_shape(tensor.name, (1, *row), (1, *row), (max_batch, *row))
  config.add_optimization_profile(profile)
  serialized = builder.build_serialized_network(network, config)
  if serialized is None:
    raise RuntimeError("TensorRT build_serialized_network returned no engine; see its log.")
  with open(plan_path, "wb") as f:
    f.write(serialized)
  return {"tensorrt_version": trt.__version__, "profile_batch": [1, 1, max_batch]}


class TensorRTRuntime(runtime_base.Runtime):
  """A serialized TensorRT engine run on GPU 0 with pycuda buffers (TensorRT 10 tensor API)."""

  name = "tensorrt"

  def __init__(self, plan_path: str, max_batch: int = runtime_base.MAX_BATCH):
    cuda = formats.backend("pycuda.driver", INSTALL)
    trt = formats.backend("tensorrt", INSTALL)
    self._cuda = cuda
    cuda.init()
    # The primary context is shared with other CUDA users in the process (TensorFlow,
    # onnxruntime) instead of creating a competing one.
    self._context_cuda = cuda.Device(0).retain_primary_context()
    self._context_cuda.push()
    try:
      self._trt_runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
      with open(plan_path, "rb") as f:
        self._engine = self._trt_runtime.deserialize_cuda_engine(f.read())
      if self._engine is None:
        raise RuntimeError(f"TensorRT could not deserialize the engine {plan_path}.")
      self._context = self._engine.create_execution_context()
      self._max_batch = max_batch
      self._stream = cuda.Stream()
      self._allocate(trt, max_batch)
    finally:
      self._context_cuda.pop()

  def _allocate(self, trt, max_batch: int) -> None:
    """One page-locked host buffer and one device buffer of `max_batch` rows per I/O tensor."""
    names = [self._engine.get_tensor_name(i) for i in range(self._engine.num_io_tensors)]
    self._buffers = {}
    self._inputs, self._outputs = [], []
    for name in names:
      is_input = self._engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
      (self._inputs if is_input else self._outputs).append(name)
      dtype = np.dtype(trt.nptype(self._engine.get_tensor_dtype(name)))
      row = tuple(int(d) for d in self._engine.get_tensor_shape(name)[1:])
      # Page-locked host buffers make the async copies truly asynchronous on the stream.
      host = self._cuda.pagelocked_empty((max_batch, *row), dtype)
      device = self._cuda.mem_alloc(host.nbytes)
      self._context.set_tensor_address(name, int(device))
      self._buffers[name] = (host, device, row)

  def predict(self, batch: runtime_base.Inputs) -> np.ndarray:
    rows = runtime_base.rows(batch)
    if rows > self._max_batch:
      raise ValueError(f"TensorRT engine accepts at most {self._max_batch} rows, got {rows}.")
    self._context_cuda.push()
    try:
      for name in self._inputs:
        host, device, row = self._buffers[name]
        host[:rows] = np.asarray(batch[name]).reshape(rows, *row)
        self._context.set_input_shape(name, (rows, *row))
        self._cuda.memcpy_htod_async(device, host[:rows], self._stream)
      if not self._context.execute_async_v3(self._stream.handle):
        raise RuntimeError("TensorRT execute_async_v3 failed.")
      host, device, _ = self._buffers[self._outputs[0]]
      self._cuda.memcpy_dtoh_async(host[:rows], device, self._stream)
      self._stream.synchronize()
    finally:
      self._context_cuda.pop()
    return host[:rows].astype(np.float32).reshape(rows, -1)

  def signature(self) -> dict:
    def entry(name):
      host, _, row = self._buffers[name]
      return {"name": name, "dtype": host.dtype.name, "shape": [-1, *row]}

    return {
      "inputs": [entry(n) for n in self._inputs],
      "outputs": [entry(n) for n in self._outputs],
    }

  def close(self) -> None:
    if getattr(self, "_engine", None) is None:
      return
    self._context_cuda.push()
    try:
      for _, device, _ in self._buffers.values():
        device.free()
      del self._context
      del self._engine
      del self._trt_runtime
      self._engine = None
    finally:
      self._context_cuda.pop()
      self._context_cuda.detach()


@formats.register
class TensorRTFp16Variant(Variant):
  """The checked ONNX export built into a TensorRT engine with FP16 enabled."""

  name = defaults.TENSORRT_FP16
  runtime = TensorRTRuntime.name

  def skip_reason(self, context: ConversionContext) -> str | None:
    text = [k for k, v in context.eval_inputs.items() if v.dtype == object]
    if text:
      parsed = onnx_format.parsed_text_columns(context)
      serve = "a tflite variant" if parsed else "the onnx or tflite variant"
      return (
        f"TensorRT takes numeric tensors only, and the model has text inputs {text}; serve {serve}"
      )
    return unavailable_reason()

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    path, details = onnx_format.checked_onnx(context)
    build = build_fp16_engine(path, os.path.join(out_dir, "model.plan"))
    return Conversion(["model.plan"], {"precision": "fp16", **details, **build})

  def load(self, out_dir: str, conversion: Conversion) -> runtime_base.Runtime:
    return TensorRTRuntime(os.path.join(out_dir, conversion.model_files[0]))
