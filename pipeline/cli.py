"""Command-line plumbing shared by the runners: flags, user errors and the printed summary."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import pathlib
import re
import sys
from typing import Any

from pipeline.config import OPTIMIZER_VARIANTS, PipelineConfig

_DEFAULTS = PipelineConfig()
_STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker_mirrored", "parameter_server", "tpu")
# Error types raised for bad user input by libraries we build on.
_USER_ERROR_NAMES = {"UserInputError", "StrategyUnavailableError"}
# How a full disk reads once TensorFlow, Beam or SQLite (ML Metadata) have wrapped the OSError.
_DISK_FULL_TEXTS = (os.strerror(errno.ENOSPC), "database or disk is full")


def add_pipeline_args(parser: argparse.ArgumentParser) -> None:
  """Adds the options that describe a pipeline run, each defaulting to the digits example."""
  d = _DEFAULTS
  g = parser.add_argument_group("data")
  g.add_argument(
    "--data-root",
    type=pathlib.Path,
    default=pathlib.Path(d.data_root),
    help="folder of CSV files, or of span-N/ folders (default: bundled digits)",
  )
  g.add_argument(
    "--input-pattern",
    default=None,
    help="glob under --data-root; use {SPAN} for span folders (default: "
    "'span-{SPAN}/*.csv' if --data-root has span-N folders, else '*.csv')",
  )
  g.add_argument(
    "--rolling-spans",
    type=int,
    default=d.rolling_spans,
    help="train on the newest N spans (default: %(default)s)",
  )
  g.add_argument("--label-key", default=d.label_key, help="label column (default: %(default)s)")
  g.add_argument(
    "--schema",
    type=pathlib.Path,
    default=None,
    help="schema.pbtxt to use instead of the inferred one",
  )
  g.add_argument(
    "--max-bad-row-fraction",
    type=float,
    default=d.max_bad_row_fraction,
    help="share of malformed rows tolerated, quarantined (default: %(default)s)",
  )
  g = parser.add_argument_group("training")
  g.add_argument(
    "--module-file",
    type=pathlib.Path,
    default=None,
    help="trainer module: stock TFX run_fn(fn_args) or build_model(hparams) "
    "(default: the bundled digits module)",
  )
  g.add_argument("--train-steps", type=int, default=d.train_steps, help="(default: %(default)s)")
  g.add_argument("--eval-steps", type=int, default=d.eval_steps, help="(default: %(default)s)")
  g.add_argument(
    "--strategy",
    choices=_STRATEGIES,
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
  g.add_argument("--warm-start", action="store_true", help="start from the last blessed model")
  g = parser.add_argument_group("blessing, optimization and push")
  g.add_argument(
    "--min-accuracy",
    type=float,
    default=d.min_accuracy,
    help="Evaluator's accuracy floor (default: %(default)s)",
  )
  g.add_argument(
    "--max-accuracy-drop",
    type=float,
    default=d.max_accuracy_drop,
    help="largest accuracy drop against the last blessed model (default: %(default)s)",
  )
  g.add_argument(
    "--optimizer-variants",
    default=",".join(d.optimizer_variants),
    help=f"comma-separated, from {', '.join(OPTIMIZER_VARIANTS)}; 'none' for none",
  )
  g.add_argument(
    "--tensorrt",
    choices=("off", "auto", "required"),
    default=d.tensorrt,
    help="TensorRT FP16 engine build (default: %(default)s)",
  )
  g.add_argument("--model-name", default=d.model_name, help="(default: %(default)s)")
  g.add_argument(
    "--keep-versions",
    type=int,
    default=d.keep_versions,
    help="pushed versions kept (default: %(default)s)",
  )
  g.add_argument("--no-cache", action="store_true", help="rerun every component")


def _resolve(path: pathlib.Path | None) -> str | None:
  if path is None:
    return None
  s = str(path)
  return s if "://" in s else str(path.resolve())


def config_from_args(
  args: argparse.Namespace, output_dir: pathlib.Path | str, local_paths: bool = True
) -> PipelineConfig:
  """Turns parsed flags into a PipelineConfig, checking what can be checked up front.

  Args:
    args: Flags from `add_pipeline_args`.
    output_dir: Folder for the pipeline root and serving dir.
    local_paths: Whether paths refer to this machine (checked and made
      absolute); False for paths that only exist inside the cluster's image.

  Raises:
    ValueError: with a one-sentence message, for flags that cannot work.
  """
  resolve = _resolve if local_paths else (lambda p: None if p is None else str(p))
  data_root = resolve(args.data_root)
  local = local_paths and "://" not in data_root
  if local and not os.path.isdir(data_root):
    raise ValueError(f"--data-root {data_root} is not a folder; point it at a folder of CSV files.")
  pattern = args.input_pattern
  if pattern is None:
    has_spans = local and any(re.fullmatch(r"span-\d+", p) for p in os.listdir(data_root))
    pattern = "span-{SPAN}/*.csv" if has_spans else "*.csv"
  module_file = resolve(args.module_file)
  if local_paths and module_file and "://" not in module_file and not os.path.isfile(module_file):
    raise ValueError(f"--module-file {module_file} does not exist; pass a Python trainer module.")
  schema = resolve(args.schema)
  if local_paths and schema and "://" not in schema and not os.path.isfile(schema):
    raise ValueError(f"--schema {schema} does not exist; pass a schema.pbtxt file or leave it out.")
  variants = tuple(v.strip() for v in args.optimizer_variants.split(",") if v.strip())
  if variants == ("none",):
    variants = ()
  unknown = [v for v in variants if v not in OPTIMIZER_VARIANTS]
  if unknown:
    raise ValueError(
      f"unknown optimizer variants {unknown}; choose from {list(OPTIMIZER_VARIANTS)}."
    )
  for flag, value, low in (
    ("--train-steps", args.train_steps, 1),
    ("--eval-steps", args.eval_steps, 1),
    ("--keep-versions", args.keep_versions, 1),
    ("--rolling-spans", args.rolling_spans, 1),
    ("--local-workers", args.local_workers, 0),
    ("--local-ps", args.local_ps, 0),
  ):
    if value < low:
      raise ValueError(f"{flag} must be at least {low}, got {value}.")
  out = str(output_dir)
  return PipelineConfig(
    data_root=data_root,
    pipeline_root=os.path.join(out, "pipeline_root"),
    serving_dir=os.path.join(out, "serving"),
    module_file=module_file,
    label_key=args.label_key,
    input_pattern=pattern,
    rolling_spans=args.rolling_spans,
    max_bad_row_fraction=args.max_bad_row_fraction,
    schema_path=schema,
    train_steps=args.train_steps,
    eval_steps=args.eval_steps,
    strategy=args.strategy,
    local_workers=args.local_workers,
    local_ps=args.local_ps,
    warm_start=args.warm_start,
    min_accuracy=args.min_accuracy,
    max_accuracy_drop=args.max_accuracy_drop,
    optimizer_variants=variants,
    tensorrt=args.tensorrt,
    model_name=args.model_name,
    keep_versions=args.keep_versions,
    enable_cache=not args.no_cache,
  )


def fail(message: str) -> int:
  """Prints a user error as one line and returns the exit code."""
  print(f"error: {message}", file=sys.stderr)
  return 2


def user_error_message(
  exc: BaseException, output_dir: pathlib.Path | str | None = None
) -> str | None:
  """The one-line message of a user-caused error anywhere in the cause chain, else None.

  Args:
    exc: The exception that stopped the run.
    output_dir: Named in the message when the disk is full and the error names no file.

  Returns:
    One line naming the fix, or None for errors that are our own bugs.
  """
  seen = set()
  e: BaseException | None = exc
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if type(e).__name__ in _USER_ERROR_NAMES or any(
      c.__name__ in _USER_ERROR_NAMES for c in type(e).__mro__
    ):
      msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
      # Beam appends the failing step to re-raised errors.
      return re.sub(r"\s*\[while running '.*'\]\s*$", "", msg)
    if is_disk_full(e):
      where = getattr(e, "filename", None) or output_dir
      return (
        f"no space left on device{f' under {where}' if where else ''}; "
        "free space or use another --output-dir."
      )
    e = e.__cause__ or e.__context__
  return None


def is_disk_full(exc: BaseException) -> bool:
  """Whether an error says the disk is full (ENOSPC, possibly wrapped by another library)."""
  if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
    return True
  return any(text in str(exc) for text in _DISK_FULL_TEXTS)


def quiet_logs(quiet: bool) -> None:
  """Keeps TFX's INFO chatter out of the terminal unless asked for."""
  from absl import logging as absl_logging

  level = logging.WARNING if quiet else logging.INFO
  absl_logging.set_verbosity(absl_logging.WARNING if quiet else absl_logging.INFO)
  logging.getLogger().setLevel(level)
  logging.getLogger("apache_beam").setLevel(logging.WARNING)
  # Beam logs a failing step's exception with its traceback (in-process, or forwarded from a
  # worker process) and then raises it; the runner reports it once, in one line if the user
  # can fix it, with the traceback if it is our bug.
  for name in ("apache_beam.runners.common", "apache_beam.runners.portability.local_job_service"):
    logging.getLogger(name).setLevel(logging.CRITICAL)
  import warnings

  warnings.filterwarnings("ignore")


def _fmt(v: Any, pct: bool = False) -> str:
  if v is None:
    return "-"
  if isinstance(v, float):
    return f"{v:.2%}" if pct else f"{v:.4g}"
  return str(v)


def print_summary(summary: dict[str, Any], out: pathlib.Path) -> None:
  """Prints the run summary as a few tables."""
  from rich.console import Console
  from rich.table import Table

  console = Console(file=sys.stdout, width=110)
  table = Table(title="Components", show_edge=False)
  for col in ("component", "state", "seconds"):
    table.add_column(col)
  for r in summary["components"]:
    table.add_row(r["name"], r["state"], f"{r['seconds']:.1f}")
  console.print(table)
  if summary.get("strategy"):
    s = summary["strategy"]
    console.print(
      f"strategy: {s.get('strategy')} ({s.get('num_replicas_in_sync')} replica(s)): "
      f"{s.get('strategy_reason')}"
    )
  metrics = summary.get("eval_metrics") or {}
  if metrics:
    console.print(
      "eval metrics: " + ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(metrics.items()))
    )
  report = summary.get("optimizer") or {}
  variants = report.get("variants") if isinstance(report, dict) else None
  if variants:
    console.print(_variant_table(variants))
  # new_data is False for a failed ExampleGen too; only a cached one reused its output.
  example_gen = [r for r in summary["components"] if r["name"] == "CsvExampleGen"]
  if summary.get("new_data") is False and example_gen and example_gen[0]["state"] == "cached":
    console.print("no new data: ExampleGen reused its cached output.")
  pushed = summary.get("pushed") or {}
  if pushed.get("pushed"):
    console.print(f"pushed version {pushed.get('version')} to {pushed.get('path')}")
  elif pushed:
    console.print(f"not pushed: {pushed.get('reason')}")
  console.print(
    f"status: {summary['status']} in {summary.get('seconds', 0):.1f} s; "
    f"details in {out / 'run_summary.json'}"
  )


def _variant_table(variants):
  from rich.table import Table

  rows = variants.values() if isinstance(variants, dict) else variants
  table = Table(title="Optimizer variants", show_edge=False)
  cols = ("variant", "status", "accuracy", "agreement", "size KB", "gzip KB", "p50 ms", "blessed")
  for c in cols:
    table.add_column(c)
  for v in rows:
    size = v.get("size_bytes")
    gz = v.get("gzipped_size_bytes")
    p50 = v.get("latency_ms_p50")
    table.add_row(
      str(v.get("name")),
      str(v.get("status")),
      _fmt(v.get("accuracy")),
      _fmt(v.get("top1_agreement")),
      _fmt(size / 1024 if size else None),
      _fmt(gz / 1024 if gz else None),
      _fmt(p50),
      "yes" if v.get("blessed") else "no",
    )
  return table
