"""What a person watching `run_local.py` sees: a live table of components, logs in a file.

TFX's LocalDagRunner logs 'Component X is running.' and 'is finished.' for every node; a
logging handler turns those (and the trainer's epoch lines and the optimizer's variant lines)
into rows of a `rich` table that redraws in place, while every log record goes to
`<output-dir>/logs/run-<timestamp>.log`. Output of C++ code and worker processes goes there
too: the process's stdout and stderr file descriptors point at the log file for the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import os
import pathlib
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from pipeline.definition import nodes

_RUNNING = re.compile(r"^Component (\S+) is running\.$")
_FINISHED = re.compile(r"^Component (\S+) is finished\.$")
_CACHED = re.compile(r"^A cached execution \d+ is used\.$")
_EPOCH = re.compile(r"^epoch_end (\d+)/(\d+)")
_VARIANT = re.compile(r"^Optimizer variant (\S+) \((\d+)/(\d+)\)")
_TRIAL = re.compile(r"^Trial (\d+) Complete")


@dataclasses.dataclass
class Row:
  """One component in the table."""

  name: str
  state: str = "waiting"
  started: float | None = None
  seconds: float | None = None
  detail: str = ""


class RunTable:
  """Component states, updated from log records and finished-component results."""

  def __init__(self, names: list[str], describe: Callable[[str], str] | None = None):
    self.rows = {n: Row(n) for n in names}
    self._describe = describe
    self._current: str | None = None
    self._lock = threading.Lock()

  def _row(self, name: str) -> Row:
    if name not in self.rows:
      self.rows[name] = Row(name)
    return self.rows[name]

  def on_message(self, message: str) -> None:
    """Updates the table from one log message."""
    with self._lock:
      if m := _RUNNING.match(message):
        row = self._row(m.group(1))
        row.state, row.started, self._current = "running", time.monotonic(), m.group(1)
      elif m := _FINISHED.match(message):
        row = self._row(m.group(1))
        if row.state != "cached":
          row.state = "done"
        row.seconds = time.monotonic() - (row.started or time.monotonic())
        self._current = None
        name = m.group(1)
      elif _CACHED.match(message) and self._current:
        self._row(self._current).state = "cached"
        return
      elif self._current and (m := _EPOCH.match(message)):
        self._row(self._current).detail = f"epoch {m.group(1)} of {m.group(2)}"
        return
      elif self._current and (m := _VARIANT.match(message)):
        self._row(self._current).detail = f"variant {m.group(2)} of {m.group(3)}: {m.group(1)}"
        return
      elif self._current and (m := _TRIAL.match(message)):
        self._row(self._current).detail = f"trial {m.group(1)} done"
        return
      else:
        return
    if _FINISHED.match(message) and self._describe:
      try:
        detail = self._describe(name)
        if self.rows[name].state == "cached" and detail:
          detail = f"reused: {detail}"
      except Exception as e:  # A result line must never stop a run.
        logging.getLogger(__name__).warning("no result line for %s: %s", name, e)
        detail = ""
      with self._lock:
        self._row(name).detail = detail

  def mark_failed(self) -> None:
    """Marks the running component (if any) as failed."""
    with self._lock:
      if self._current:
        row = self._row(self._current)
        row.state = "failed"
        row.seconds = time.monotonic() - (row.started or time.monotonic())

  def render(self):
    """A rich Table of the rows."""
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False, title=None)
    table.add_column("component")
    table.add_column("state")
    table.add_column("s", justify="right")
    table.add_column("result", overflow="fold")
    styles = {"running": "yellow", "done": "green", "cached": "cyan", "failed": "red"}
    with self._lock:
      for row in self.rows.values():
        seconds = row.seconds
        if row.state == "running" and row.started:
          seconds = time.monotonic() - row.started
        table.add_row(
          row.name,
          f"[{styles.get(row.state, 'dim')}]{row.state}[/]",
          "" if seconds is None else f"{seconds:.1f}",
          row.detail,
        )
    return table


class _TableHandler(logging.Handler):
  def __init__(self, table: RunTable):
    super().__init__(logging.INFO)
    self._table = table

  def emit(self, record: logging.LogRecord) -> None:
    try:
      self._table.on_message(record.getMessage())
    except Exception:
      self.handleError(record)


def log_path(output_dir: pathlib.Path) -> pathlib.Path:
  """`<output-dir>/logs/run-<UTC timestamp>.log`."""
  stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
  return output_dir / "logs" / f"run-{stamp}.log"


@contextlib.contextmanager
def captured_output(path: pathlib.Path, verbose: bool) -> Iterator[TextIO]:
  """Sends this process's stdout/stderr (Python, C++ and child processes) to a log file.

  Yields:
    A text stream to the original terminal (stdout), for the live table and the summary.
    With `verbose`, log lines are copied to the terminal's stderr as well.
  """
  path.parent.mkdir(parents=True, exist_ok=True)
  sys.stdout.flush()
  sys.stderr.flush()
  saved_out, saved_err = os.dup(1), os.dup(2)
  log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  tee = None
  try:
    if verbose:
      read_fd, write_fd = os.pipe()
      tee = threading.Thread(target=_tee, args=(read_fd, log_fd, saved_err), daemon=True)
      tee.start()
      target = write_fd
    else:
      target = log_fd
    os.dup2(target, 1)
    os.dup2(target, 2)
    if verbose:
      os.close(write_fd)
    terminal = os.fdopen(os.dup(saved_out), "w", buffering=1, encoding="utf-8")
    try:
      yield terminal
    finally:
      terminal.flush()
      terminal.close()
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved_out, 1)
    os.dup2(saved_err, 2)
    os.close(saved_out)
    if tee is not None:
      tee.join(timeout=5)
    os.close(saved_err)
    os.close(log_fd)


def _tee(read_fd: int, log_fd: int, terminal_fd: int) -> None:
  with os.fdopen(read_fd, "rb", buffering=0) as source:
    while chunk := source.read(65536):
      os.write(log_fd, chunk)
      with contextlib.suppress(OSError):
        os.write(terminal_fd, chunk)


def configure_logging(verbose: bool) -> None:
  """INFO to the (captured) stderr: absl's, TFX's and ours; Beam's own chatter at WARNING."""
  from absl import logging as absl_logging

  absl_logging.set_verbosity(absl_logging.INFO)
  handler = logging.StreamHandler(sys.stderr)
  handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
  root = logging.getLogger()
  root.handlers = [handler]
  root.setLevel(logging.INFO)
  logging.getLogger("apache_beam").setLevel(logging.WARNING)
  # Beam logs a failing step's exception with its traceback and then raises it; the runner
  # reports it once.
  for name in ("apache_beam.runners.common", "apache_beam.runners.portability.local_job_service"):
    logging.getLogger(name).setLevel(logging.CRITICAL)
  import warnings

  warnings.filterwarnings("ignore")
  del verbose


@contextlib.contextmanager
def live_table(table: RunTable, terminal: TextIO, quiet: bool) -> Iterator[None]:
  """Shows the table, redrawn in place, while the body runs (nothing with `quiet`)."""
  handler = _TableHandler(table)
  logging.getLogger().addHandler(handler)
  try:
    if quiet:
      yield
      return
    from rich.console import Console
    from rich.live import Live

    console = Console(file=terminal, width=110)
    with Live(table.render(), console=console, refresh_per_second=4, transient=True) as live:
      stop = threading.Event()

      def refresh() -> None:
        while not stop.wait(0.25):
          live.update(table.render())

      thread = threading.Thread(target=refresh, daemon=True)
      thread.start()
      try:
        yield
      finally:
        stop.set()
        thread.join(timeout=2)
  finally:
    logging.getLogger().removeHandler(handler)


def summary_lines(
  summary: dict[str, Any], table: RunTable, out: pathlib.Path, log: str, report: str | None = None
):
  """Prints the final component table and today's summary through rich, ending with the report
  page's path (or why it was not written)."""
  from rich.console import Group
  from rich.text import Text

  parts: list[Any] = [table.render()]
  for line in describe_summary(summary, out, log, report):
    parts.append(Text(line))
  variants = (summary.get("optimizer") or {}).get("variants") or []
  if variants:
    parts.insert(1, variant_table(variants))
  return Group(*parts)


def describe_summary(
  summary: dict[str, Any], out: pathlib.Path, log: str, report: str | None = None
) -> list[str]:
  """Today's summary as a few lines of text; the last names the report page when given."""
  lines = []
  if summary.get("cleanup"):
    lines.append(f"cleaned up after a killed run: {summary['cleanup']}")
  config = summary.get("config") or {}
  task = summary.get("task") or config.get("task")
  if task:
    why = f" ({config['task_reason']})" if config.get("task_reason") else ""
    lines.append(
      f"task: {task} on label {config.get('label_key')!r}{why}; floor: "
      f"{(summary.get('floor') or {}).get('reason') or config.get('floor_reason')}"
    )
  if summary.get("quantity_check"):
    lines.append(
      f"classes or quantity: {summary['quantity_check']} (--task regression reads a quantity)"
    )
  tuned_here = any(c["name"] == nodes.TUNER for c in summary.get("components", []))
  if summary.get("hparams") and tuned_here:
    tuned = {
      k: v
      for k, v in summary["hparams"].items()
      if k in ("hidden_units", "num_layers", "learning_rate")
    }
    lines.append(f"hyper-parameters from the Tuner: {tuned}")
  strategy = summary.get("strategy") or {}
  if strategy.get("strategy"):
    by = strategy.get("strategy_chosen_by") or "trainer"
    lines.append(
      f"strategy: {strategy['strategy']} ({strategy.get('num_replicas_in_sync')} replica(s)), "
      f"chosen by the {by}"
    )
  lines += _training_lines(summary.get("training_plan"), bool(config.get("count_readings")))
  if summary.get("profile_skipped"):
    lines.append(f"no profile: {summary['profile_skipped']}")
  lines += _gate_lines((summary.get("night") or {}).get("gate"))
  if summary.get("baseline_skipped"):
    lines.append(f"live version not scored: {summary['baseline_skipped']}")
  metrics = summary.get("eval_metrics") or {}
  if metrics:
    shown = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(metrics.items()))
    lines.append(f"eval metrics: {shown}")
  unseen = summary.get("eval_only_classes") or {}
  if unseen:
    shown = ", ".join(f"{n:,} of {value!r}" for value, n in list(unseen.items())[:3])
    lines.append(
      f"eval rows of classes the train split lacks: {shown}; the model has no such class, so "
      "they count as wrong."
    )
  pushed = summary.get("pushed") or {}
  for note in (summary.get("night") or {}).get("notes") or []:
    lines.append(f"data: {note}.")
  if summary.get("new_data") is False and pushed.get("pushed"):
    lines.append(
      "data: the ExampleGen reused an earlier run's output, whose model is not the live version."
    )
  elif summary.get("new_data") is False:
    lines.append("no new data: the ExampleGen reused its cached output.")
  if pushed.get("pushed"):
    lines.append(f"pushed version {pushed.get('version')} to {pushed.get('path')}")
  elif pushed:
    lines.append(f"not pushed: {pushed.get('reason')}")
  for notice in summary.get("notifications") or []:
    if notice.get("ok"):
      lines.append(f"notified {notice['target']}")
    else:
      lines.append(
        f"could not notify {notice['target']} ({notice.get('attempts')} tries): {notice['error']}"
      )
  lines.append(
    f"status: {summary['status']} in {summary.get('seconds', 0):.1f} s; details in "
    f"{out / 'run_summary.json'}; log {log}"
  )
  if report:
    lines.append(f"report: {report}")
  return lines


def _training_lines(plan: dict[str, Any] | None, both_readings: bool = False) -> list[str]:
  """The Trainer's inputs, why it trained as it did and the epochs it ran and kept, the reading
  a count label kept (`both_readings`: the run meant to train both), and its warm start."""
  lines = []
  if plan and plan.get("inputs"):
    lines.append(f"inputs: {plan['inputs']}")
  if plan:
    line = f"training: {plan['reason']}"
    members = plan.get("members")
    if members:
      line += f"; ran {', '.join(str(m['epochs_run']) for m in members)} epochs"
      if all(m.get("best_epoch") for m in members):
        line += f", kept epochs {', '.join(str(m['best_epoch']) for m in members)}"
      linear = plan.get("linear")
      if linear and "share" in linear:
        line += (
          f"; the linear model ran {linear['epochs_run']} epochs and the held-out rows gave it "
          f"a share of {linear['share']:g}"
        )
    elif plan.get("epochs_run"):
      line += f"; ran {plan['epochs_run']} epochs"
      if plan.get("best_epoch"):
        line += f", kept epoch {plan['best_epoch']}"
    lines.append(line)
    if plan.get("readings"):
      lines.append(f"label: {plan['readings']['reason']}")
    elif both_readings and plan.get("holdout_rows") == 0:
      lines.append(
        "label: trained as classes only: no rows were held out to compare the two readings on "
        "(too few training rows); --task regression reads a quantity"
      )
    if plan.get("warm_start"):
      lines.append(f"warm start: {plan['warm_start']}")
  return lines


def _gate_lines(report: dict[str, Any] | None) -> list[str]:
  """The data gate's verdict, its largest drift and its compatible changes, in a line or two."""
  if not report:
    return []
  if not report.get("compared"):
    return [f"data gate: nothing to compare with ({report.get('reason')})", *_noted(report)]
  live = report.get("live_version")
  drift = report.get("drift") or {}
  line = f"data gate: {'passed' if report.get('passed') else 'stopped the night'} against live "
  line += f"version {live}'s training data ({len(drift)} columns compared"
  if drift:
    worst = max(drift, key=lambda c: drift[c]["value"] / (drift[c]["threshold"] or 1))
    value, bound = drift[worst]["value"], drift[worst]["threshold"]
    line += f"; closest to its bound: {worst!r}, {value:.3g} of {_fmt(bound)}"
  lines = [line + ")"]
  accepted = [f["text"] for f in report.get("findings", []) if f.get("accepted")]
  if accepted:
    lines.append("accepted changes: " + "; ".join(accepted))
  return lines + _noted(report)


def _noted(report: dict[str, Any]) -> list[str]:
  """The gate's notes (findings that stop nothing), the first three, in a line."""
  info = [f["text"] for f in report.get("findings", []) if f.get("kind") == "info"]
  if not info:
    return []
  more = f"; and {len(info) - 3} more" if len(info) > 3 else ""
  return ["noted: " + "; ".join(info[:3]) + more]


def _fmt(v: Any) -> str:
  if v is None:
    return "-"
  if isinstance(v, float):
    return f"{v:.4g}"
  return str(v)


# Characters of a variant's skip or failure reason shown; run_summary.json has all of it.
_REASON_CHARS = 160


def _short(reason: Any) -> str:
  """A reason cut at a word boundary with an ellipsis, so that what is shown is whole words."""
  import textwrap

  return textwrap.shorten(str(reason or "-"), _REASON_CHARS, placeholder=" …")


def variant_table(variants: list[dict[str, Any]]):
  """The Optimizer's variants as a rich Table, then one line per variant that did not convert.

  The reasons are lines under the table rather than a column of it: a column as narrow as a
  terminal leaves it breaks words, and a line wraps at spaces. Their text is plain, not markup
  (`pip install .[tensorrt]` keeps its brackets).
  """
  from rich.console import Group
  from rich.table import Table
  from rich.text import Text

  table = Table(title="Optimizer variants", show_edge=False, pad_edge=False)
  longest = max((len(str(v.get("name"))) for v in variants), default=0)
  table.add_column("variant", no_wrap=True, min_width=longest)
  for c in ("status", "metric", "agreement", "KB", "gzip KB", "p50 ms", "blessed"):
    table.add_column(c, overflow="fold")
  reasons = []
  for v in variants:
    size = v.get("size_bytes")
    gz = v.get("gzipped_size_bytes")
    metric = v.get("metric_value", v.get("accuracy"))
    name, status = str(v.get("name")), str(v.get("status"))
    if status != "ok":
      reasons.append(Text(f"{name} {status}: {_short(v.get('reason'))}"))
    table.add_row(
      Text(name),
      Text(status),
      _fmt(metric),
      _fmt(v.get("agreement", v.get("top1_agreement"))),
      _fmt(size / 1024 if size else None),
      _fmt(gz / 1024 if gz else None),
      _fmt(v.get("latency_ms_p50")),
      "yes" if v.get("blessed") else "no",
    )
  return Group(table, *reasons)
