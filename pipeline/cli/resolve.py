"""Flags -> PipelineConfig: values checked, paths resolved, the task decided from the data."""

from __future__ import annotations

import argparse
import os
import pathlib
import re
from typing import Any

from components import storage
from components.distributed_trainer import trainer_api
from core import defaults, floors, properties, splits, tasks
from pipeline.cli import acceptance, checks, data_checks, span_checks
from pipeline.definition.config import PipelineConfig

_DEFAULTS = PipelineConfig()


def default_model_name(data_root: str) -> str:
  """A serving name from the data folder's name: 'digits' for data/digits, s3://b/churn -> churn."""
  name = re.sub(r"[^A-Za-z0-9._-]", "_", str(data_root).rstrip("/").rsplit("/", 1)[-1])
  name = name.lstrip("._-")[:128]
  return name or "model"


def _as_given(path: str | None) -> str | None:
  return None if path is None else str(path)


def _absolute(path: str | None) -> str | None:
  if path is None:
    return None
  return str(path) if storage.is_remote(path) else str(pathlib.Path(path).resolve())


def config_from_args(
  args: argparse.Namespace,
  pipeline_root: str,
  serving_dir: str,
  *,
  local_paths: bool = True,
  local_modules: bool | None = None,
  local_notify: bool | None = None,
) -> PipelineConfig:
  """Checks the flags and the data and resolves them into a PipelineConfig.

  Args:
    args: Flags from `add_pipeline_args`.
    pipeline_root: where the artifacts go.
    serving_dir: where the Pusher publishes versions.
    local_paths: whether local paths refer to this machine (checked and made absolute);
      False for paths that only exist inside the cluster's image.
    local_modules: whether --module-file and --transform-module are on this machine (read to
      decide Transform and Tuner); defaults to `local_paths`. The Kubeflow compiler passes
      True: TFX packages the module files at compile time, while the data is read in the cluster.
    local_notify: whether --notify env:NAME and file:PATH are read on this machine (checked
      now); defaults to `local_paths`. The Kubeflow compiler passes False: the exit handler
      reads them in the cluster (a Kubernetes secret, a mounted file).

  Raises:
    checks.CheckError: (a UserInputError) with a one-sentence message naming the fix.
  """
  variants = _check_values(args)
  local_notify = local_paths if local_notify is None else local_notify
  gate, accepted, notify = _nightly_settings(args, local_notify)
  if local_modules is None:
    local_modules = local_paths
  paths = _resolve_paths(args, pipeline_root, serving_dir, local_paths, local_modules)
  data_root, module_file, transform_module, schema, pattern, plan = paths
  # Only the default model (bundled, or around a build_model network) reads a count both ways.
  default_model = plan.style != defaults.RUN_FN
  decision = _decide_from_data(args, data_root, pattern, local_paths, serving_dir, default_model)
  return PipelineConfig(
    **_fields_from_flags(args),
    data_root=data_root,
    pipeline_root=pipeline_root,
    serving_dir=serving_dir,
    module_file=module_file,
    transform_module=transform_module,
    transform=plan.transform,
    network_module=plan.style == defaults.BUILD_MODEL_FN,
    input_pattern=pattern,
    schema_path=schema,
    task=decision.task,
    task_reason=decision.task_reason,
    count_readings=decision.readings,
    quantity_max_mse=decision.quantity_max_mse,
    tune=plan.tune,
    min_accuracy=decision.min_accuracy,
    max_mse=decision.max_mse,
    floor_reason=decision.floor_reason,
    optimizer_variants=variants,
    # 'none' means no variant at all: TensorRT (and the ONNX it is built from) only if asked.
    tensorrt=args.tensorrt or (defaults.TENSORRT_OFF if not variants else _DEFAULTS.tensorrt),
    gate_thresholds=gate,
    accept_changes=accepted,
    notify=notify,
    heartbeat=_heartbeat(args.heartbeat, local_notify),
    stale_after_s=_stale_after(args),
  )


def _stale_after(args: argparse.Namespace) -> float:
  """--stale-after in seconds (0 where it is not given)."""
  from pipeline.cli import night_job

  text = getattr(args, "stale_after", "")
  return night_job.parse_duration(text, "--stale-after") if text else 0.0


def _fields_from_flags(args: argparse.Namespace) -> dict[str, Any]:
  """The PipelineConfig fields that the flags give as they are (or decide on their own)."""
  return {
    "label_key": args.label_key,
    "eval_label_key": args.eval_label_key,
    "delimiter": args.delimiter,
    "rolling_spans": args.rolling_spans,
    "max_bad_row_fraction": args.max_bad_row_fraction,
    "exclude_columns": tuple(args.exclude_columns),
    "split_column": args.split_column,
    "max_classes": args.max_classes,
    "keep_label_tokens": tasks.keeps_label_tokens(args.task),
    "hparams": dict(args.hparams),
    "train_steps": args.train_steps,
    "eval_steps": args.eval_steps,
    "strategy": args.strategy,
    "local_workers": args.local_workers,
    "local_ps": args.local_ps,
    "warm_start": args.warm_start,
    "tune_trials": args.tune_trials,
    "profile_steps": args.profile_steps,
    "max_accuracy_drop": args.max_accuracy_drop,
    "max_error_increase": args.max_error_increase,
    "min_eval_examples": args.min_eval_examples,
    "auto_floor": floors.automatic(
      args.task, args.label_key, args.eval_label_key, args.min_accuracy, args.max_mse
    ),
    "variant_max_accuracy_drop": args.variant_max_drop,
    "model_name": args.model_name,
    "pipeline_name": args.model_name,
    "keep_versions": args.keep_versions,
    "enable_cache": not args.no_cache,
    "data_gate": not args.no_data_gate,
    "notify_every_night": args.notify_every_night,
  }


def _nightly_settings(
  args: argparse.Namespace, local_paths: bool
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
  """The data gate's thresholds (JSON), the accepted changes and the notification targets.

  Notification targets naming an environment variable or a file are checked here only for
  local runs; on Kubeflow they are read inside the cluster.
  """
  from components.data_gate import thresholds
  from components.nights import notify_lib

  if args.notify_every_night and not args.notify:
    raise checks.CheckError("--notify-every-night needs a --notify target; pass --notify too.")
  gate = thresholds.parse_thresholds(args.gate_threshold)
  accepted = thresholds.parse_accepted(args.accept_changes)
  targets = notify_lib.parse_targets(args.notify, check_source=local_paths)
  return gate.to_json(), tuple(accepted), tuple(t.text for t in targets)


def _heartbeat(value: str, local_paths: bool) -> str:
  """The --heartbeat target, checked as a --notify value is ('' for none)."""
  from components.nights import notify_lib

  if not value:
    return ""
  try:
    return notify_lib.parse_target(value, check_source=local_paths).text
  except notify_lib.NotifyError as e:
    raise checks.CheckError(str(e).replace("--notify", "--heartbeat")) from None


# How a tab may be typed: '\t' (as the ExampleGen's hint prints it), 'tab', or a tab itself.
_TAB_SPELLINGS = ("\\t", "tab", "\t")


def _delimiter(value: str) -> str:
  """The --delimiter character: one character, a tab being the one control character allowed."""
  if value in _TAB_SPELLINGS:
    return "\t"
  checks.check_text("--delimiter", value)
  if len(value) != 1 or value in ('"', "\n", "\r"):
    raise checks.CheckError(
      f"--delimiter must be one character other than a quote, got {value!r}; e.g. ';', or "
      "'\\t' for a tab."
    )
  return value


def _check_values(args: argparse.Namespace) -> tuple[str, ...]:
  """Checks every flag's value on its own; returns the optimizer variants asked for."""
  args.delimiter = _delimiter(args.delimiter)
  for name, value in vars(args).items():
    if isinstance(value, str) and name != "delimiter":
      checks.check_text(f"--{name.replace('_', '-')}", value)
  checks.check_fraction("--max-bad-row-fraction", args.max_bad_row_fraction)
  checks.check_fraction("--max-accuracy-drop", args.max_accuracy_drop)
  if args.min_accuracy is not None:
    checks.check_fraction("--min-accuracy", args.min_accuracy)
  if args.max_mse is not None:
    checks.check_at_least("--max-mse", args.max_mse, 0)
  checks.check_at_least("--max-error-increase", args.max_error_increase, 0)
  checks.check_at_least("--variant-max-drop", args.variant_max_drop, 0)
  for flag, value, low in (
    ("--eval-steps", args.eval_steps, 0),
    ("--keep-versions", args.keep_versions, 1),
    ("--rolling-spans", args.rolling_spans, 1),
    ("--local-workers", args.local_workers, 0),
    ("--local-ps", args.local_ps, 0),
    ("--max-classes", args.max_classes, 2),
    ("--min-eval-examples", args.min_eval_examples, 1),
    ("--tune-trials", args.tune_trials, 1),
  ):
    checks.check_at_least(flag, value, low)
  checks.check_local_cluster(args.local_workers, args.local_ps)
  checks.check_excluded_columns(args.exclude_columns, args.label_key)
  if args.train_steps is not None:
    checks.check_at_least("--train-steps", args.train_steps, 1)
  if args.profile_steps and args.train_steps:
    # Without --train-steps the trainer checks the range against its plan, before training.
    trainer_api.check_profile_steps(args.profile_steps, args.train_steps)
  from components.serving.paths import PusherError, validate_model_name

  if args.model_name is None:
    args.model_name = default_model_name(args.data_root)
  try:
    validate_model_name(args.model_name)
  except PusherError as e:
    raise checks.CheckError(f"--model-name: {e}") from None
  variants = tuple(v.strip() for v in args.optimizer_variants.split(",") if v.strip())
  if variants == ("none",):
    variants = ()
  unknown = [v for v in variants if v not in defaults.VARIANTS]
  if unknown:
    raise checks.CheckError(
      f"unknown optimizer variants {unknown}; choose from {', '.join(defaults.VARIANTS)}."
    )
  return variants


def _resolve_paths(
  args: argparse.Namespace,
  pipeline_root: str,
  serving_dir: str,
  local_paths: bool,
  local_modules: bool,
) -> tuple[str, str | None, str | None, str | None, str, checks.ModulePlan]:
  """Checks the paths and the module files; returns the data root, module, transform module,
  schema, input pattern and the module plan."""
  resolve = _absolute if local_paths else _as_given
  resolve_module = _absolute if local_modules else _as_given
  data_root = resolve(args.data_root)
  module_file = resolve_module(args.module_file)
  transform_module = resolve_module(args.transform_module)
  schema = resolve(args.schema)
  local_data = local_paths and not storage.is_remote(data_root)
  if local_data:
    checks.check_folder("--data-root", data_root, must_exist=True)
  for flag, value in (
    ("--data-root", data_root),
    ("--pipeline-root", pipeline_root),
    ("--serving-dir", serving_dir),
    ("--module-file", module_file),
    ("--transform-module", transform_module),
    ("--schema", schema),
  ):
    checks.check_uri(flag, value)
  if local_paths and schema and not storage.is_remote(schema):
    if not os.path.isfile(schema):
      raise checks.CheckError(
        f"--schema {schema} does not exist; pass a schema.pbtxt file or leave it out."
      )
    checks.check_schema_file("--schema", schema)
  plan = checks.plan_modules(module_file, transform_module, args.tune, local=local_modules)
  if plan.style != defaults.RUN_FN:
    # The default model reads --hparams: a misspelt name or a bad value is refused now, not
    # after the data components ran (a run_fn module reads custom_config['hparams'] itself).
    from models.tabular import hparams

    hparams.check_hparams(args.hparams, allow_extra=plan.style == defaults.BUILD_MODEL_FN)
  if args.eval_label_key and not plan.transform:
    raise checks.CheckError(
      "--eval-label-key names a label made by a Transform, but the module has no "
      "preprocessing_fn; leave it out or pass --transform-module."
    )
  pattern = args.input_pattern
  if pattern is None:
    pattern = data_checks.default_pattern(data_root) if local_data else "*.csv"
  return data_root, module_file, transform_module, schema, pattern, plan


def _check_label_kept(path: str, args: argparse.Namespace, serving_dir: str) -> None:
  """`data_checks.check_label_kept` against the version live in the model's serving folder."""
  from components.serving import live as serving_live

  if not args.model_name or storage.is_remote(serving_dir):
    return
  try:
    live = serving_live.live_version(serving_dir, args.model_name)
    columns = serving_live.training_columns(live) if live is not None else None
  except Exception:  # A view: the Pusher and the data gate report an unreadable folder.
    return
  if live is not None:
    data_checks.check_label_kept(path, args.delimiter, args.label_key, columns, live.version)


def _decide_from_data(
  args: argparse.Namespace,
  data_root: str,
  pattern: str,
  local_paths: bool,
  serving_dir: str,
  default_model: bool = True,
) -> data_checks.LabelDecision:
  """Reads the data where this machine can: the columns the flags name (`--accept-changes`'s
  may also be the live version's, in `serving_dir`), the task, the floor."""
  local_data = local_paths and not storage.is_remote(data_root)
  # The split the run makes (factory.py builds the ExampleGen's from the same plan).
  plan = splits.plan(_DEFAULTS.train_hash_buckets, _DEFAULTS.eval_hash_buckets, args.split_column)
  # Object-store data is read here too when this machine can reach it (run_local); the
  # Kubeflow compiler (local_paths=False) cannot assume that.
  readable = local_data or (
    local_paths and storage.is_remote(data_root) and args.task == tasks.AUTO
  )
  if readable:
    files = span_checks.input_files(data_root, pattern)
    if not files:
      raise checks.CheckError(
        f"no file under {data_root} matches {pattern!r}; check --data-root and --input-pattern."
      )
    wanted = [("--exclude-columns", c) for c in args.exclude_columns]
    if args.split_column:
      wanted.append(("--split-column", args.split_column))
    _check_label_kept(files[0], args, serving_dir)
    data_checks.check_flag_columns(files[0], args.delimiter, wanted)
    data_checks.check_inputs_left(files[0], args.delimiter, args.label_key, args.exclude_columns)
    if default_model and not args.transform_module:  # It reads the columns by their names.
      skip = [args.label_key, *args.exclude_columns]
      data_checks.check_model_names(files[0], args.delimiter, skip)
    acceptance.check_flag(args.accept_changes, files, args.delimiter, serving_dir, args.model_name)
    decision = data_checks.decide_label(
      files,
      args.label_key,
      args.delimiter,
      args.task,
      args.max_classes,
      args.min_accuracy,
      args.max_mse,
      model_label_key=args.eval_label_key,
      default_model=default_model,
    )
    if plan.partition_column:
      data_checks.check_grouped_eval_size(
        files,
        plan.partition_column,
        args.delimiter,
        plan.hash_buckets,
        decision.rows,
        args.min_eval_examples,
      )
    else:
      keep_tokens = tasks.keeps_label_tokens(args.task)
      evals = data_checks.eval_rows(
        files, data_root, args.label_key, args.delimiter, plan.hash_buckets, keep_tokens
      )
      data_checks.check_eval_size(
        decision.rows,
        evals,
        plan.share(properties.EVAL_SPLIT),
        args.min_eval_examples,
        decision.unlabeled,
      )
    return decision
  if args.task == tasks.AUTO:
    raise checks.CheckError(
      f"--data-root {data_root} cannot be read here to tell the task from the label; pass "
      "--task binary, multiclass or regression."
    )
  floor = args.min_accuracy or 0.0
  given = f"--task {args.task}"
  return data_checks.LabelDecision(args.task, floor, args.max_mse, "", 0, task_reason=given)
