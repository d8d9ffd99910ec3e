"""Command-line plumbing shared by the runners: flags, the resolved config and user errors."""

from __future__ import annotations

import argparse
import errno
import os
import pathlib
import re
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from components import defaults, storage, tasks
from components.distributed_trainer import steps_lib
from components.errors import UserCodeError, UserInputError, find
from pipeline import checks
from pipeline.config import PipelineConfig

_DEFAULTS = PipelineConfig()
# How a full disk reads once TensorFlow, Beam or SQLite (ML Metadata) have wrapped the OSError.
_DISK_FULL_TEXTS = (os.strerror(errno.ENOSPC), "database or disk is full")
_FILE_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT)


class ArgumentParser(argparse.ArgumentParser):
  """An argument parser whose errors are one line naming the fix (no usage block).

  Every runner uses it, so a mistyped flag reads like every other mistake:
  `run_local.py: error: unrecognized arguments: --trian-steps (see --help)`, exit 2.
  """

  def error(self, message: str) -> NoReturn:
    self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _hparams(text: str) -> dict:
  """Parses `key=value,key=value`; numbers become numbers."""
  out = {}
  for part in filter(None, (p.strip() for p in text.split(","))):
    key, sep, value = part.partition("=")
    if not sep or not key.strip() or "=" in value:
      raise argparse.ArgumentTypeError(f"{part!r} is not key=value (e.g. hidden_units=128)")
    for cast in (int, float):
      try:
        out[key.strip()] = cast(value)
        break
      except ValueError:
        continue
    else:
      out[key.strip()] = value.strip()
  return out


def _steps(text: str) -> tuple[int, int]:
  start, sep, end = text.partition(",")
  try:
    a, b = int(start), int(end)
  except ValueError:
    raise argparse.ArgumentTypeError(f"{text!r} is not START,END (e.g. 10,20)") from None
  if not sep or a < 1 or b < a:
    raise argparse.ArgumentTypeError(f"{text!r}: pass START,END with 1 <= START <= END")
  return a, b


def _columns(text: str) -> tuple[str, ...]:
  return tuple(c.strip() for c in text.split(",") if c.strip())


def add_pipeline_args(parser: argparse.ArgumentParser) -> None:
  """Adds the options that describe a pipeline run, each defaulting to the digits example."""
  _add_data_args(parser.add_argument_group("data"))
  _add_training_args(parser.add_argument_group("training"))
  _add_push_args(parser.add_argument_group("blessing, optimization and push"))


def _add_data_args(g) -> None:
  """Where the data is and how it is read and split."""
  d = _DEFAULTS
  g.add_argument(
    "--data-root",
    default=d.data_root,
    help="folder (or gs://, s3:// prefix) of CSV files, plain or .csv.gz, or of span-N/ "
    "folders (default: bundled digits)",
  )
  g.add_argument(
    "--input-pattern",
    default=None,
    help="glob under --data-root; use {SPAN} for span folders (default: 'span-{SPAN}/*.csv' "
    "if --data-root has span-N folders, else '*.csv'; '.csv.gz' files are found too)",
  )
  g.add_argument("--delimiter", default=d.delimiter, help="field delimiter (default: ',')")
  g.add_argument(
    "--rolling-spans",
    type=int,
    default=d.rolling_spans,
    help="train on the newest N spans (default: %(default)s)",
  )
  g.add_argument("--label-key", default=d.label_key, help="label column (default: %(default)s)")
  g.add_argument(
    "--exclude-columns",
    type=_columns,
    default=(),
    help="comma-separated columns the model must not learn from (ids, leaks)",
  )
  g.add_argument(
    "--split-column",
    default=None,
    help="keep rows with the same value of this column in the same split (a grouped split, "
    "e.g. a user id; stock TFX's partition_feature_name); default: each row's place in its "
    "file decides",
  )
  g.add_argument("--schema", default=None, help="schema.pbtxt to use instead of the inferred one")
  g.add_argument(
    "--max-bad-row-fraction",
    type=float,
    default=d.max_bad_row_fraction,
    help="share of malformed rows tolerated, quarantined (default: %(default)s)",
  )


def _add_training_args(g) -> None:
  """The trainer module, the strategy and the training budget."""
  d = _DEFAULTS
  g.add_argument(
    "--module-file",
    default=None,
    help="trainer module: stock TFX run_fn(fn_args) (with preprocessing_fn for a Transform and "
    "tuner_fn for --tune) or build_model(hparams) (default: the bundled tabular module)",
  )
  g.add_argument(
    "--transform-module",
    default=None,
    help="a separate file holding preprocessing_fn for a TFX Transform",
  )
  g.add_argument(
    "--eval-label-key",
    default=None,
    help="the label as the model sees it after Transform, e.g. species_xf (default: --label-key)",
  )
  g.add_argument(
    "--task",
    choices=(tasks.AUTO, *tasks.TASKS),
    default=tasks.AUTO,
    help="auto (default): two label values make binary, int or text classes multiclass, "
    "floats regression",
  )
  g.add_argument(
    "--max-classes",
    type=int,
    default=d.max_classes,
    help="largest class count of a classification label (default: %(default)s)",
  )
  g.add_argument(
    "--hparams",
    type=_hparams,
    default={},
    help="key=value,... for the model, e.g. hidden_units=128,num_layers=2,learning_rate=0.01",
  )
  g.add_argument(
    "--train-steps",
    type=int,
    default=None,
    help="optimizer steps; default: the default model trains for epochs sized to the data "
    f"with early stopping, and a run_fn module gets {defaults.TRAIN_STEPS}",
  )
  g.add_argument(
    "--eval-steps",
    type=int,
    default=d.eval_steps,
    help="eval batches; 0 (default): one pass over the eval split at the global batch size "
    "(64), which is also what a run_fn module gets as fn_args.eval_steps",
  )
  g.add_argument(
    "--strategy",
    choices=defaults.STRATEGY_NAMES,
    default=d.strategy,
    help="tf.distribute strategy (default: %(default)s, chosen from the hardware)",
  )
  g.add_argument(
    "--local-workers",
    type=int,
    default=d.local_workers,
    help="launch N local worker processes on loopback (multi-worker test runs)",
  )
  g.add_argument(
    "--local-ps",
    type=int,
    default=d.local_ps,
    help="parameter-server processes for --strategy parameter_server",
  )
  g.add_argument("--warm-start", action="store_true", help="start from the live model")
  g.add_argument("--tune", action="store_true", help="run the TFX Tuner with the module's tuner_fn")
  g.add_argument(
    "--tune-trials", type=int, default=d.tune_trials, help="Tuner trials (default: %(default)s)"
  )
  g.add_argument(
    "--profile-steps",
    type=_steps,
    default=None,
    help="FIRST,LAST: write a TensorBoard profile of training steps FIRST to LAST (from 1, "
    "whole executions of 10 steps around them) under model_run",
  )


def _add_push_args(g) -> None:
  """The blessing floors, the Optimizer's variants and the Pusher."""
  d = _DEFAULTS
  g.add_argument(
    "--min-accuracy",
    type=float,
    default=None,
    help="classification floor on the Evaluator's accuracy (default: beat always answering "
    "the most frequent class)",
  )
  g.add_argument(
    "--max-accuracy-drop",
    type=float,
    default=d.max_accuracy_drop,
    help="largest accuracy drop against the live model (default: %(default)s)",
  )
  g.add_argument(
    "--max-mse",
    type=float,
    default=None,
    help="regression ceiling on mean squared error (default: below the label's variance)",
  )
  g.add_argument(
    "--max-error-increase",
    type=float,
    default=d.max_error_increase,
    help="regression: largest relative MSE increase against the live model (default: %(default)s)",
  )
  g.add_argument(
    "--min-eval-examples",
    type=int,
    default=d.min_eval_examples,
    help="fewer eval rows and nothing is blessed (default: %(default)s)",
  )
  g.add_argument(
    "--optimizer-variants",
    default=",".join(d.optimizer_variants),
    help=f"comma-separated, from {', '.join(defaults.VARIANTS)}; 'none' for none",
  )
  g.add_argument(
    "--variant-max-drop",
    type=float,
    default=d.variant_max_accuracy_drop,
    help="an optimized variant ships when its metric is at most this much worse than the "
    "trained model's: accuracy points, or percent of the RMSE (default: %(default)s)",
  )
  g.add_argument(
    "--tensorrt",
    choices=defaults.TENSORRT_MODES,
    default=d.tensorrt,
    help="TensorRT FP16 engine build (default: %(default)s)",
  )
  g.add_argument(
    "--model-name",
    default=None,
    help="serving name, also the pipeline's name (default: the --data-root folder's name, "
    "'digits' for the bundled data)",
  )
  g.add_argument(
    "--keep-versions",
    type=int,
    default=d.keep_versions,
    help="pushed versions kept (default: %(default)s)",
  )
  g.add_argument("--no-cache", action="store_true", help="rerun every component")


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

  Raises:
    checks.CheckError: (a UserInputError) with a one-sentence message naming the fix.
  """
  variants = _check_values(args)
  if local_modules is None:
    local_modules = local_paths
  paths = _resolve_paths(args, pipeline_root, serving_dir, local_paths, local_modules)
  data_root, module_file, transform_module, schema, pattern, plan = paths
  task, floor, max_mse, reason = _decide_from_data(args, data_root, pattern, local_paths)
  return PipelineConfig(
    data_root=data_root,
    pipeline_root=pipeline_root,
    serving_dir=serving_dir,
    module_file=module_file,
    transform_module=transform_module,
    transform=plan.transform,
    label_key=args.label_key,
    eval_label_key=args.eval_label_key,
    input_pattern=pattern,
    delimiter=args.delimiter,
    rolling_spans=args.rolling_spans,
    max_bad_row_fraction=args.max_bad_row_fraction,
    schema_path=schema,
    exclude_columns=tuple(args.exclude_columns),
    split_column=args.split_column,
    task=task,
    max_classes=args.max_classes,
    hparams=dict(args.hparams),
    train_steps=args.train_steps,
    eval_steps=args.eval_steps,
    strategy=args.strategy,
    local_workers=args.local_workers,
    local_ps=args.local_ps,
    warm_start=args.warm_start,
    tune=plan.tune,
    tune_trials=args.tune_trials,
    profile_steps=args.profile_steps,
    min_accuracy=floor,
    max_accuracy_drop=args.max_accuracy_drop,
    max_mse=max_mse,
    max_error_increase=args.max_error_increase,
    min_eval_examples=args.min_eval_examples,
    floor_reason=reason,
    auto_floor=(
      args.min_accuracy is None
      and args.max_mse is None
      and (
        not args.eval_label_key or args.eval_label_key == args.label_key or args.task == tasks.AUTO
      )
    ),
    optimizer_variants=variants,
    variant_max_accuracy_drop=args.variant_max_drop,
    tensorrt=args.tensorrt,
    model_name=args.model_name,
    pipeline_name=args.model_name,
    keep_versions=args.keep_versions,
    enable_cache=not args.no_cache,
  )


def _check_values(args: argparse.Namespace) -> tuple[str, ...]:
  """Checks every flag's value on its own; returns the optimizer variants asked for."""
  for name, value in vars(args).items():
    if isinstance(value, str):
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
  if args.train_steps is not None:
    checks.check_at_least("--train-steps", args.train_steps, 1)
  if args.profile_steps and args.train_steps:
    # Without --train-steps the trainer checks the range against its plan, before training.
    steps_lib.check_profile_steps(args.profile_steps, args.train_steps)
  if len(args.delimiter) != 1:
    raise checks.CheckError(
      f"--delimiter must be one character, got {args.delimiter!r}; e.g. ';' or $'\\t'."
    )
  from components.pusher import serving_paths

  if args.model_name is None:
    args.model_name = default_model_name(args.data_root)
  try:
    serving_paths.validate_model_name(args.model_name)
  except serving_paths.PusherError as e:
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
    from components.distributed_trainer import tabular_model

    tabular_model.check_hparams(args.hparams, allow_extra=plan.style == defaults.BUILD_MODEL_FN)
  if args.eval_label_key and not plan.transform:
    raise checks.CheckError(
      "--eval-label-key names a label made by a Transform, but the module has no "
      "preprocessing_fn; leave it out or pass --transform-module."
    )
  pattern = args.input_pattern
  if pattern is None:
    pattern = checks.default_pattern(data_root) if local_data else "*.csv"
  return data_root, module_file, transform_module, schema, pattern, plan


def _decide_from_data(
  args: argparse.Namespace, data_root: str, pattern: str, local_paths: bool
) -> tuple[str, float, float | None, str]:
  """Reads the data where this machine can: the columns the flags name, the task, the floor."""
  local_data = local_paths and not storage.is_remote(data_root)
  task, floor, max_mse, reason = args.task, args.min_accuracy or 0.0, args.max_mse, ""
  eval_share = 1 / (_DEFAULTS.train_hash_buckets + _DEFAULTS.eval_hash_buckets)
  # Object-store data is read here too when this machine can reach it (run_local); the
  # Kubeflow compiler (local_paths=False) cannot assume that.
  readable = local_data or (
    local_paths and storage.is_remote(data_root) and args.task == tasks.AUTO
  )
  if readable:
    files = checks.input_files(data_root, pattern)
    if not files:
      raise checks.CheckError(
        f"no file under {data_root} matches {pattern!r}; check --data-root and --input-pattern."
      )
    wanted = [("--exclude-columns", c) for c in args.exclude_columns]
    if args.split_column:
      wanted.append(("--split-column", args.split_column))
    checks.check_columns(files[0], args.delimiter, wanted)
    decision = checks.decide_label(
      files,
      args.label_key,
      args.delimiter,
      args.task,
      args.max_classes,
      args.min_accuracy,
      args.max_mse,
      model_label_key=args.eval_label_key,
    )
    checks.check_eval_size(decision.rows, eval_share, args.min_eval_examples)
    task, floor, max_mse, reason = (
      decision.task,
      decision.min_accuracy,
      decision.max_mse,
      decision.floor_reason,
    )
  elif task == tasks.AUTO:
    raise checks.CheckError(
      f"--data-root {data_root} cannot be read here to tell the task from the label; pass "
      "--task binary, multiclass or regression."
    )
  return task, floor, max_mse, reason


def fail(message: str) -> int:
  """Prints a user error as one line and returns the exit code."""
  print(f"error: {message}", file=sys.stderr)
  return 2


def user_error_message(exc: BaseException, output_dir: str | None = None) -> str | None:
  """The one-line message of a user-caused error anywhere in the cause chain, else None.

  Args:
    exc: The exception that stopped the run.
    output_dir: Named in the message when the disk is full and the error names no file.

  Returns:
    One line naming the fix, or None for errors that are our own bugs.
  """
  error = find(exc, UserInputError)
  if error is not None:
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    # Beam appends the failing step to errors it re-raises.
    return re.sub(r"\s*\[while running '.*'\]\s*$", "", line)
  code_error = find(exc, UserCodeError)
  if code_error is not None:
    return str(code_error)
  os_error = find(exc, OSError)
  if os_error is not None and os_error.errno in _FILE_ERRNOS:
    where = os_error.filename or output_dir
    return (
      f"{os.strerror(os_error.errno).lower()}{f' at {where}' if where else ''}; free space, fix "
      "the permissions or pass another --output-dir."
    )
  e: BaseException | None = exc
  seen = set()
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if is_disk_full(e):
      return (
        f"no space left on device{f' under {output_dir}' if output_dir else ''}; "
        "free space or use another --output-dir."
      )
    e = e.__cause__ or e.__context__
  return None


def user_code_error(exc: BaseException, module_files: Sequence[str | None]) -> UserCodeError | None:
  """A UserCodeError for an exception raised inside one of the user's module files, else None.

  Our trainer wraps errors from run_fn itself; stock components (Transform calling
  preprocessing_fn, the Tuner calling tuner_fn) do not, so the runner looks for the user's file
  in the tracebacks of the exception chain. TFX imports module files from a packaged copy, so
  frames are matched by file name.

  Args:
    exc: the exception that stopped the run.
    module_files: --module-file and --transform-module (None when not given).
  """
  by_name = {os.path.basename(f): f for f in module_files if f}
  found = None
  e: BaseException | None = exc
  seen = set()
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename]
    user = [f for f in frames if os.path.basename(f.filename) in by_name]
    if user:  # the deepest exception of the chain that passed through the user's code wins
      error = UserCodeError(by_name[os.path.basename(user[-1].filename)], user[-1].name, e)
      error.__cause__ = e
      found = error
    e = e.__cause__ or e.__context__
  return found


def print_user_traceback(exc: BaseException) -> None:
  """Prints the traceback of an error raised in the user's module code, if that is the cause."""
  code_error = find(exc, UserCodeError)
  if code_error is None or find(exc, UserInputError) is not None:
    return
  cause = code_error.__cause__ or code_error
  traceback.print_exception(type(cause), cause, cause.__traceback__, file=sys.stderr)


def is_disk_full(exc: BaseException) -> bool:
  """Whether an error says the disk is full (ENOSPC, possibly wrapped by another library)."""
  if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
    return True
  return any(text in str(exc) for text in _DISK_FULL_TEXTS)
