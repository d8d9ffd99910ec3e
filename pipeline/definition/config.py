"""What a pipeline run is made of: one frozen config, defaults from core.defaults."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

from core import defaults

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_DATA_ROOT = REPO_ROOT / "data" / "digits"
DEFAULT_OUTPUT_DIR = REPO_ROOT / "output"
DEFAULT_IMAGE = "ghcr.io/tfx-pipeline-kit/tfx-pipeline-kit:0.1.0"


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
  """Paths and options of one pipeline. Paths are absolute local paths or URIs (gs://, s3://).

  The runners fill it from flags and resolve what depends on the data (the task and the
  blessing floor) before the pipeline is built; `create_pipeline` only reads it.
  """

  pipeline_name: str = "digits"
  data_root: str = str(DEFAULT_DATA_ROOT)
  pipeline_root: str = str(DEFAULT_OUTPUT_DIR / "pipeline_root")
  serving_dir: str = str(DEFAULT_OUTPUT_DIR / "serving")
  # None trains the bundled default module, imported from the installed package.
  module_file: str | None = None
  # A separate file holding preprocessing_fn; None: the module file's own, if it has one.
  transform_module: str | None = None
  # Whether a Transform runs (the module, or transform_module, defines preprocessing_fn).
  transform: bool = False
  # The module defines build_model(hparams) and no run_fn: the default model trains its network
  # and exports the default model's signatures (transform_features among them).
  network_module: bool = False
  label_key: str = defaults.LABEL_KEY
  # The label as the model sees it (e.g. 'species_xf' after Transform); None: label_key.
  eval_label_key: str | None = None
  # Input: a glob under data_root, with `{SPAN}` for nightly span folders.
  input_pattern: str = "*.csv"
  delimiter: str = ","
  rolling_spans: int = 1
  # Rows with the same value of this column go to the same split; None: by row position.
  split_column: str | None = None
  eval_hash_buckets: int = 1
  train_hash_buckets: int = 4
  max_bad_row_fraction: float = 0.0
  schema_path: str | None = None
  exclude_columns: tuple[str, ...] = ()
  # Task: 'binary', 'multiclass' or 'regression' once resolved; 'auto' until then.
  task: str = defaults.TASK
  # Why the task is the one resolved, for the summary (tasks.task_reason).
  task_reason: str = ""
  # The label is a count read both ways (`tasks.reads_both`): the model keeps the reading that
  # errs less on held-out rows, and the Evaluator follows it (with this ceiling for a quantity).
  count_readings: bool = False
  quantity_max_mse: float | None = None
  max_classes: int = defaults.MAX_CLASSES
  # A text label's missing tokens (NA, None) are classes (--task multiclass), not missing.
  keep_label_tokens: bool = False
  hparams: dict[str, Any] = dataclasses.field(default_factory=dict)
  # Training.
  # None: the default model sizes its training to the data; run_fn modules get TRAIN_STEPS.
  train_steps: int | None = None
  eval_steps: int = defaults.EVAL_STEPS
  strategy: str = defaults.AUTO
  local_workers: int = 0
  local_ps: int = 0
  # Kubeflow only: tfjob_manifest.TFJobSettings JSON; the trainer step runs a TFJob ('': it trains).
  tfjob: str = ""
  warm_start: bool = False
  tune: bool = False
  tune_trials: int = 10
  profile_steps: tuple[int, int] | None = None
  # Blessing. Classification: accuracy floor and largest drop against the live model.
  # Regression: mean squared error ceiling (None: none) and largest relative increase.
  min_accuracy: float = 0.0
  max_accuracy_drop: float = defaults.MAX_ACCURACY_DROP
  max_mse: float | None = None
  max_error_increase: float = 0.05
  min_eval_examples: int = defaults.MIN_EVAL_EXAMPLES
  # How the floor was chosen, for the summary ("--min-accuracy", or the auto rule).
  floor_reason: str = ""
  # No floor was given: the Evaluator takes it from the eval split (core.floors.from_label_stats).
  auto_floor: bool = False
  # Optimizer.
  optimizer_variants: tuple[str, ...] = defaults.DEFAULT_VARIANTS
  variant_max_accuracy_drop: float = defaults.VARIANT_MAX_DROP
  tensorrt: str = defaults.TENSORRT_AUTO
  # Pusher.
  model_name: str = "digits"
  keep_versions: int = defaults.KEEP_VERSIONS
  enable_cache: bool = True
  # Nights. The data gate compares each night's data with the live version's training data.
  data_gate: bool = True
  # data_gate.thresholds.Thresholds as JSON ('': the defaults).
  gate_thresholds: str = ""
  # Columns whose changes tonight are accepted (--accept-changes), or 'all'.
  accept_changes: tuple[str, ...] = ()
  # Where failed and stopped nights are reported (notify_lib targets: env:NAME, file:PATH, URL).
  notify: tuple[str, ...] = ()
  # Report every night, pushed or not, too.
  notify_every_night: bool = False
  # A dead man's switch pinged at every night's end (a notify_lib target; '' for none).
  heartbeat: str = ""
  # --stale-after in seconds: a night whose newest data is older is noted (0: never).
  stale_after_s: float = 0.0

  def settings_fingerprint(self) -> str:
    """A digest of every setting of the run and of the contents of the files it names (module,
    Transform module, schema): LiveModel's cache key holds it, so that a run whose settings
    differ from the one that pushed the live version compares its model with that version
    (`live_model_lib.live_model_key`). A file that cannot be read counts by its path alone."""
    import hashlib
    import json

    digest = hashlib.sha256(
      json.dumps(dataclasses.asdict(self), sort_keys=True, default=str).encode()
    )
    for path in (self.module_file, self.transform_module, self.schema_path):
      if path:
        digest.update(_file_digest(path).encode())
    return digest.hexdigest()[:16]

  @property
  def model_label_key(self) -> str:
    """The label key the Evaluator and the Optimizer read (after Transform, if any)."""
    return self.eval_label_key or self.label_key


def _file_digest(path: str) -> str:
  import hashlib

  from components import storage

  try:
    with storage.files(path).open(path, "rb") as f:
      return hashlib.sha256(f.read()).hexdigest()
  except (OSError, ValueError):
    return f"unread:{path}"
