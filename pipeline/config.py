"""Every default of the pipeline, in one place; runners and tests start from these."""

from __future__ import annotations

import dataclasses
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_DATA_ROOT = REPO_ROOT / "data" / "digits"
DEFAULT_OUTPUT_DIR = REPO_ROOT / "output"
DEFAULT_IMAGE = "ghcr.io/tfx-pipeline-kit/tfx-pipeline-kit:0.1.0"

OPTIMIZER_VARIANTS = (
  "pruned",
  "tflite_float32",
  "tflite_dynamic_range",
  "tflite_float16",
  "tflite_int8",
  "pruned_int8",
  "qat",
  "onnx",
  "tensorrt_fp16",
)
# QAT retrains, so it is opt-in; TensorRT is switched by the `tensorrt` option (off/auto/required).
DEFAULT_OPTIMIZER_VARIANTS = tuple(
  v for v in OPTIMIZER_VARIANTS if v not in ("qat", "tensorrt_fp16")
)


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
  """What a pipeline run is made of. Paths must be absolute (or URIs)."""

  pipeline_name: str = "digits"
  data_root: str = str(DEFAULT_DATA_ROOT)
  pipeline_root: str = str(DEFAULT_OUTPUT_DIR / "pipeline_root")
  serving_dir: str = str(DEFAULT_OUTPUT_DIR / "serving")
  # None trains the bundled digits module, imported from the installed package.
  module_file: str | None = None
  label_key: str = "label"
  # Input: a glob under data_root, with `{SPAN}` for nightly span folders.
  input_pattern: str = "*.csv"
  rolling_spans: int = 1
  eval_hash_buckets: int = 1
  train_hash_buckets: int = 4
  max_bad_row_fraction: float = 0.0
  schema_path: str | None = None
  # Training.
  train_steps: int = 600
  eval_steps: int = 50
  strategy: str = "auto"
  local_workers: int = 0
  local_ps: int = 0
  warm_start: bool = False
  # Blessing.
  min_accuracy: float = 0.90
  max_accuracy_drop: float = 0.01
  # Optimizer.
  optimizer_variants: tuple[str, ...] = DEFAULT_OPTIMIZER_VARIANTS
  variant_max_accuracy_drop: float = 1.0
  tensorrt: str = "auto"
  # Pusher.
  model_name: str = "digits"
  keep_versions: int = 5
  enable_cache: bool = True
