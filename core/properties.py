"""The names and types that more than one step, the command line or the model must spell alike.

One owner, as `tfx/types/standard_component_specs.py` is for TFX, so that a writer and its
readers cannot drift apart: the split names, the execution-property keys LiveModel, the Pusher
and the Kubeflow key task share, the keys the trainer fills in a module's `custom_config`, and
the custom properties (and file names) each step writes on its outputs for the next steps, the
runners and the report to read. No module imports another component's executor or spec for one
of these names.
"""

from typing import Any

# The split names of the Examples the kit's ExampleGen writes, and the Trainer, Evaluator and
# data gate read (TFX's own defaults).
TRAIN_SPLIT = "train"
EVAL_SPLIT = "eval"

# Execution properties of LiveModel and the Pusher (and parameters of the KFP live-key task).
SERVING_DIR_KEY = "serving_dir"
MODEL_NAME_KEY = "model_name"
LIVE_KEY_KEY = "live_key"

# Examples (the kit's CsvExampleGen): rows written to each split, "num_rows_<split>".
EXAMPLES_ROWS_PREFIX = "num_rows_"
# Examples: the spans the rows were read from (a JSON list).
EXAMPLES_SPANS = "data_spans"
# Examples: str(span) -> {"rows", "digest"} of the rows read from each span (JSON; see
# `example_gen_lib.span_digests`): the data gate finds a span delivered again with them.
EXAMPLES_SPAN_DIGESTS = "span_digests"
# Examples: split -> counts (and moments) of the label column's values (JSON): the Evaluator's
# automatic floor, the data gate's and the Pusher's manifest's label counts.
EXAMPLES_LABEL_STATS = "label_stats"
# Examples: rows quarantined (the bad ones and those without a label).
EXAMPLES_BAD_ROWS = "num_bad_rows"
# Examples: of those, rows left out only because their label cell is empty.
EXAMPLES_UNLABELED_ROWS = "num_unlabeled_rows"
# Examples: of those, the rows whose text label is a missing token, by token (JSON, e.g.
# {"NA": 11}); absent when there are none. `--task multiclass` keeps them as classes.
EXAMPLES_UNLABELED_TOKENS = "unlabeled_label_tokens"
# Examples: the file of the quarantined rows (CSV: file, line, reason, row); the report page
# shows the first few.
EXAMPLES_QUARANTINE = "quarantine_uri"

# TFX's blessing flag on a ModelBlessing (the Evaluator's, 0/1) and an ExampleAnomalies (the
# ExampleValidator's, JSON by split).
BLESSED_PROPERTY = "blessed"

# The night's id: an execution property of the steps that record the night (the DataGate, the
# Pusher and the RunReport) and a parameter of the Kubeflow exit task. A Kubeflow package sets
# it to the run's id placeholder, which the orchestrator fills in, as it fills any parameter;
# a local run leaves it out, and those steps read `nights_lib.NIGHT_ID_ENV`.
NIGHT_ID_KEY = "night_id"

# The DistributedTrainer.
# Keys of `custom_config` the pipeline fills for the module (the default model reads them; every
# run_fn gets the whole dict).
LABEL_KEY_CONFIG = "label_key"
TASK_CONFIG = "task"
EXCLUDE_COLUMNS_CONFIG = "exclude_columns"
HPARAMS_CONFIG = "hparams"
SEED_CONFIG = "seed"
PROFILE_STEPS_CONFIG = "profile_steps"
TUNE_TRIALS_CONFIG = "tune_trials"
# The column the ExampleGen split train from eval by (--split-column): the default model holds
# out whole groups of it for early stopping, as the eval split does.
SPLIT_COLUMN_CONFIG = "split_column"
# True when the label is a count decided before the run to be read both ways
# (`tasks.reads_both`): the default model trains classes and a quantity and keeps the better.
READINGS_CONFIG = "count_readings"
# Custom properties written on the Model artifact.
STRATEGY_PROPERTY = "strategy"
NUM_REPLICAS_PROPERTY = "num_replicas_in_sync"
STRATEGY_REASON_PROPERTY = "strategy_reason"
# "trainer" or "module": who chose the strategy that trained (trainer_api.CHOSEN_BY_*).
STRATEGY_CHOSEN_BY_PROPERTY = "strategy_chosen_by"
EVAL_ACCURACY_PROPERTY = "eval_accuracy"
EVAL_METRICS_PROPERTY = "eval_metrics"
MODULE_STYLE_PROPERTY = "module_style"
# The module whose run_fn built the model, as the trainer loaded it (a module path, a packaged
# `name@wheel` or a module file); readers of the Keras model import it first, for its layers.
TRAINER_MODULE_PROPERTY = "trainer_module"
NUM_WORKERS_PROPERTY = "num_workers"
RESTARTS_PROPERTY = "restarts"
INITIAL_EPOCH_PROPERTY = "initial_epoch"
STEPS_RUN_PROPERTY = "steps_run"
# JSON of TrainResult.plan (the default model's TrainingPlan), with the epochs it ran and the
# epoch it kept.
TRAINING_PLAN_PROPERTY = "training_plan"
EXAMPLES_PER_SEC_PROPERTY = "train_examples_per_sec"
TASK_PROPERTY = "task"
LABEL_CLASSES_PROPERTY = "label_classes"
HPARAMS_PROPERTY = "hparams"
PROFILE_DIR_PROPERTY = "profile_dir"
# Why --profile-steps wrote no profile (training stopped before the range), when it did not.
PROFILE_SKIPPED_PROPERTY = "profile_skipped"
DATA_FINGERPRINTS_PROPERTY = "data_fingerprints"
TRAINING_FINGERPRINT_PROPERTY = "training_fingerprint"
# Where a TFJob trained: its name, namespace and replica counts (JSON {"worker": 2, ...}).
TFJOB_NAME_PROPERTY = "tfjob_name"
TFJOB_NAMESPACE_PROPERTY = "tfjob_namespace"
TFJOB_REPLICAS_PROPERTY = "tfjob_replicas"

# LiveModel's outputs (the baseline, the warm-start model and the reference statistics).
LIVE_AVAILABLE_PROPERTY = "available"
LIVE_VERSION_PROPERTY = "live_version"
LIVE_REASON_PROPERTY = "reason"
# On reference_statistics: the training data's label counts and rows (JSON, the manifest's).
LIVE_TRAINING_DATA_PROPERTY = "training_data"

# Custom properties written on the PushedModel artifact (stock names for the first three).
PUSHED_PROPERTY = "pushed"
PUSHED_DESTINATION_PROPERTY = "pushed_destination"
PUSHED_VERSION_PROPERTY = "pushed_version"
PUSHED_REASON_PROPERTY = "pushed_reason"
CONTENT_SHA256_PROPERTY = "content_sha256"
# PushedModel: the version live after the push (LIVE_VERSION_PROPERTY, as on LiveModel's).

# The Evaluator's ModelBlessing and ModelEvaluation.
# The blessing property saying why the live version was not scored, when it could not be.
BASELINE_SKIPPED_PROPERTY = "baseline_skipped"
# The version that was live when LiveModel read the serving folder for this evaluation (0:
# nothing was live). The Pusher publishes only while it still is (`publish.push_version`).
EVALUATED_WHILE_LIVE_PROPERTY = "evaluated_while_live"

# The ModelBlessing properties the floor is recorded in.
FLOOR_PROPERTY = "floor"
FLOOR_REASON_PROPERTY = "floor_reason"
# The ModelBlessing property that says how the check of a count label read as classes went.
QUANTITY_CHECK_PROPERTY = "quantity_check"

# A property of the ModelEvaluation (its folder holds TFMA's files and nothing else, as stock's
# does): how the candidate's predictions compare with the labels, for the report page.
PREDICTIONS_PROPERTY = "predictions_summary"

# The DataGate's result: its report file and its custom properties.
GATE_REPORT_FILE = "gate.json"
GATE_PASSED_PROPERTY = "passed"
GATE_SUMMARY_PROPERTY = "summary"


def examples_rows(split: str) -> str:
  """The property holding the number of rows the ExampleGen wrote to `split`."""
  return f"{EXAMPLES_ROWS_PREFIX}{split}"


def evaluated_while_live(baselines: Any) -> int | None:
  """The version live when LiveModel read the serving folder, from its baseline artifacts (0:
  nothing was live), or None without a LiveModel baseline."""
  for artifact in baselines or []:
    if not live_available(artifact):
      return 0
    if artifact.has_custom_property(LIVE_VERSION_PROPERTY):
      return int(artifact.get_int_custom_property(LIVE_VERSION_PROPERTY))
  return None


def live_available(artifact: Any) -> bool:
  """False for a LiveModel output marked unavailable (nothing live, or nothing to warm from).

  Args:
    artifact: a TFX artifact (anything with `has_custom_property` and `get_int_custom_property`).
  """
  return not (
    artifact.has_custom_property(LIVE_AVAILABLE_PROPERTY)
    and artifact.get_int_custom_property(LIVE_AVAILABLE_PROPERTY) == 0
  )
