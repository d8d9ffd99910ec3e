"""The runners' flags: a parser whose errors are one line, and the pipeline flags they share."""

from __future__ import annotations

import argparse
import difflib
from typing import NoReturn

from core import defaults, tasks
from pipeline.definition.config import PipelineConfig

_DEFAULTS = PipelineConfig()


_UNRECOGNIZED = "unrecognized arguments: "


class ArgumentParser(argparse.ArgumentParser):
  """An argument parser whose errors are one line naming the fix (no usage block).

  Every runner uses it, so a mistyped flag reads like every other mistake, with the closest
  flag it has: `run_local.py: error: unrecognized arguments: --trian-steps 5; did you mean
  --train-steps? (see --help)`, exit 2.
  """

  _parsed: argparse.Namespace | None = None

  def __init__(self, *args, **kwargs):
    # A prefix of a flag is a typo, not the flag: subcommands' parsers are made here too.
    kwargs.setdefault("allow_abbrev", False)
    super().__init__(*args, **kwargs)

  def parse_known_args(self, args=None, namespace=None):
    parsed, extras = super().parse_known_args(args, namespace)
    self._parsed = parsed  # which subcommand ran, for the flags a typo is compared with
    return parsed, extras

  def error(self, message: str) -> NoReturn:
    if message.startswith(_UNRECOGNIZED):
      message += _did_you_mean(message[len(_UNRECOGNIZED) :].split(), self._long_options())
    self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

  def _long_options(self) -> list[str]:
    """This parser's --flags, and those of the subcommands the last parse chose."""
    options: list[str] = []
    parser: argparse.ArgumentParser | None = self
    while parser is not None:
      actions = parser._actions  # argparse has no public list of a parser's arguments
      options += [o for a in actions for o in a.option_strings if o.startswith("--")]
      chosen = [
        a.choices.get(getattr(self._parsed, a.dest, None))
        for a in actions
        if isinstance(a, argparse._SubParsersAction) and a.dest != argparse.SUPPRESS
      ]
      parser = next((c for c in chosen if c is not None), None)
    return options


def _did_you_mean(unrecognized: list[str], options: list[str]) -> str:
  """'; did you mean --train-steps?' for the flags among `unrecognized` close to an option."""
  guesses = []
  for arg in unrecognized:
    flag = arg.partition("=")[0]
    if not flag.startswith("--") or flag in options:
      continue
    close = difflib.get_close_matches(flag, options, n=1, cutoff=0.75)
    if close:
      guesses.append((flag, close[0]))
  if not guesses:
    return ""
  if len(guesses) == 1:
    return f"; did you mean {guesses[0][1]}?"
  return "; did you mean " + ", ".join(f"{right} for {wrong}" for wrong, right in guesses) + "?"


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


class _MergeHparams(argparse.Action):
  """Each --hparams adds its keys to those of the flags before it (a later value wins)."""

  def __call__(self, parser, namespace, values, option_string=None):
    setattr(namespace, self.dest, {**(getattr(namespace, self.dest, None) or {}), **values})


def _steps(text: str) -> tuple[int, int]:
  start, sep, end = text.partition(",")
  try:
    a, b = int(start), int(end)
  except ValueError:
    raise argparse.ArgumentTypeError(f"{text!r} is not START,END (e.g. 10,20)") from None
  if not sep or a < 1 or b < a:
    raise argparse.ArgumentTypeError(f"{text!r}: pass START,END with 1 <= START <= END")
  return a, b


def _column(text: str) -> str:
  """A column name as the header's are read: without surrounding spaces."""
  name = text.strip()
  if not name:
    raise argparse.ArgumentTypeError("a column's name, not blanks")
  return name


def _columns(text: str) -> tuple[str, ...]:
  return tuple(c.strip() for c in text.split(",") if c.strip())


def add_pipeline_args(parser: argparse.ArgumentParser) -> None:
  """Adds the options that describe a pipeline run, each defaulting to the digits example."""
  _add_data_args(parser.add_argument_group("data"))
  _add_training_args(parser.add_argument_group("training"))
  _add_distribution_args(parser.add_argument_group("distribution"))
  _add_push_args(parser.add_argument_group("blessing, optimization and push"))
  _add_nightly_args(parser.add_argument_group("nights: the data gate and notifications"))


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
  g.add_argument(
    "--label-key", type=_column, default=d.label_key, help="label column (default: %(default)s)"
  )
  g.add_argument(
    "--exclude-columns",
    type=_columns,
    default=(),
    help="comma-separated columns the model must not learn from (ids, leaks)",
  )
  g.add_argument(
    "--split-column",
    type=_column,
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
    help="share of malformed rows tolerated, quarantined (default: %(default)s); rows without a "
    "label are left out and do not count",
  )


def _add_training_args(g) -> None:
  """The trainer module, the task, the model and the training budget."""
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
    type=_column,
    default=None,
    help="the label as the model sees it after Transform, e.g. species_xf (default: --label-key)",
  )
  g.add_argument(
    "--task",
    choices=(tasks.AUTO, *tasks.TASKS),
    default=tasks.AUTO,
    help="auto (default): two label values make binary, int or text classes multiclass, "
    "floats regression; multiclass also learns a text label's missing tokens (NA, None) as "
    "classes, where other tasks leave those rows out",
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
    action=_MergeHparams,
    default={},
    help="key=value,... for the model, e.g. hidden_units=128,num_layers=2,learning_rate=0.01; "
    "repeat the flag to add more",
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


def _add_distribution_args(g) -> None:
  """The tf.distribute strategy and the local cluster that tries it on one machine."""
  d = _DEFAULTS
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
    help=f"comma-separated, from {', '.join(defaults.VARIANTS)}; 'none' for none (and no "
    "TensorRT unless --tensorrt is given)",
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
    default=None,
    help=f"TensorRT FP16 engine build, through ONNX (default: {d.tensorrt}; off with "
    "--optimizer-variants none)",
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


def _add_nightly_args(g) -> None:
  """The data gate between nights, accepted changes and who hears about a night."""
  g.add_argument(
    "--gate-threshold",
    action="append",
    default=[],
    metavar="[COLUMN:]CHECK=VALUE",
    help="a data-gate threshold, for every column or one, repeatable: drift, scale, new_values, "
    "missing, label, rows, max_rows, live_model; VALUE a number or off (docs/nightly.md)",
  )
  g.add_argument(
    "--accept-changes",
    action="append",
    default=[],
    metavar="COLUMNS",
    help="let tonight's changes in these columns (comma-separated; :row_count for the row "
    "count; :repeated_data for a span that repeats one the live version was trained on; all "
    "for every change) through the data gate; recorded in the night's record",
  )
  g.add_argument(
    "--no-data-gate",
    action="store_true",
    help="do not compare tonight's data with the live version's before training",
  )
  g.add_argument(
    "--notify",
    action="append",
    default=[],
    metavar="TARGET",
    help="where a failed or stopped night is reported, repeatable: env:NAME or file:PATH "
    "holding an apprise URL (Slack, Teams, mailto://, json://...), or a URL without "
    "credentials",
  )
  g.add_argument(
    "--notify-every-night",
    action="store_true",
    help="with --notify: report every night, pushed or not, too",
  )
  g.add_argument(
    "--stale-after",
    default="",
    metavar="DURATION",
    help="note the night (its summary, record and a notice) when no new data came for this "
    "long, e.g. 2d or 36h: the newest span first read longer ago, or without spans the newest "
    "input file written longer ago (default: off)",
  )
  g.add_argument(
    "--heartbeat",
    default="",
    metavar="TARGET",
    help="a dead man's switch pinged at the end of every night (its URL + '/fail' when the "
    "night did not end well), in --notify's forms, e.g. jsons://hc-ping.com/UUID or env:NAME",
  )
