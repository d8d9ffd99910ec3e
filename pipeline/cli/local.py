"""Runs the pipeline on LocalDagRunner with SQLite ML Metadata; defaults use the bundled digits."""

import logging
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import warnings

# Library deprecation notices (google-api-core on Python 3.10, ...) say nothing about the run.
warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=DeprecationWarning)

import argparse  # noqa: E402 (after the warning filters, which must come first)
import dataclasses  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from components import storage  # noqa: E402
from core.errors import UserInputError  # noqa: E402
from pipeline.cli import (  # noqa: E402
  checks,
  flags,
  progress,
  reporting,
  resolve,
  run_signals,
  scratch,
)
from pipeline.definition import nodes  # noqa: E402
from pipeline.definition.config import DEFAULT_OUTPUT_DIR  # noqa: E402

# The exit status of a run that found its output folder busy (EX_TEMPFAIL): the nightly job
# records such a night as skipped.
EXIT_BUSY = 75


# Libraries every run's components import; they are imported before the run so that their
# objects are frozen with TFX's (components.memory.freeze_imports).
RUN_IMPORTS = (
  "tensorflow",
  "tf_keras",
  "apache_beam",
  "tensorflow_data_validation",
  "tensorflow_model_analysis",
)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
  """run_local.py's flags (schedule.py checks a nightly job's flags with the same parser)."""
  parser = flags.ArgumentParser(
    prog=prog,
    description="Train, validate, optimize and push a model with LocalDagRunner. "
    "With no options it runs on the bundled digits data.",
  )
  parser.add_argument(
    "--output-dir",
    default=str(DEFAULT_OUTPUT_DIR),
    help="pipeline root, metadata.sqlite, serving/, logs/ and run_summary.json go here "
    "(default: %(default)s)",
  )
  parser.add_argument(
    "--pipeline-root",
    default=None,
    help="where the artifacts go: a folder or an object-store URI (gs://, s3://) "
    "(default: <output-dir>/pipeline_root)",
  )
  parser.add_argument(
    "--serving-dir",
    default=None,
    help="where the Pusher publishes versions (default: <output-dir>/serving)",
  )
  flags.add_pipeline_args(parser)
  parser.add_argument(
    "--direct-workers",
    type=int,
    default=0,
    help="Beam DirectRunner worker processes for Beam components (0: in-process, the default)",
  )
  parser.add_argument(
    "--beam-arg",
    action="append",
    default=[],
    help="a Beam pipeline option for the Beam components, repeatable, e.g. "
    "--beam-arg=--runner=DataflowRunner --beam-arg=--project=P (a distributed runner makes "
    "the in-process paths step aside for Beam)",
  )
  shown = parser.add_mutually_exclusive_group()
  shown.add_argument("--quiet", action="store_true", help="print only the summary")
  shown.add_argument("--verbose", action="store_true", help="stream the full log as well")
  return parser


def parse_args(argv=None) -> argparse.Namespace:
  return build_parser().parse_args(argv)


def check_args(args: argparse.Namespace):
  """Every up-front check of run_local.py's flags and data; returns the PipelineConfig.

  Raises:
    UserInputError: one line naming the fix.
  """
  out = pathlib.Path(args.output_dir).resolve()
  checks.check_text("--output-dir", args.output_dir)
  checks.check_writable("--output-dir", str(out))
  for flag, value in (
    ("--serving-dir", args.serving_dir),
    ("--pipeline-root", args.pipeline_root),
  ):
    if value:
      checks.check_text(flag, value)
      if not storage.is_remote(value):
        checks.check_writable(flag, value)
  checks.check_at_least("--direct-workers", args.direct_workers, 0)
  checks.check_beam_args("--beam-arg", args.beam_arg)
  serving = _location(args.serving_dir, out / "serving")
  root = _location(args.pipeline_root, out / "pipeline_root")
  config = resolve.config_from_args(args, root, serving)
  for flag, module in (
    ("--module-file", config.module_file),
    ("--transform-module", config.transform_module),
  ):
    if module and not storage.is_remote(module):
      checks.check_module_imports(flag, module)
  checks.check_serving_writable("--serving-dir", config.serving_dir, config.model_name)
  from components.serving import live

  current = live.live_version(config.serving_dir, config.model_name)
  if current is not None:
    live.check_intact(current, config.model_name)
  return config


def main(argv=None) -> int:
  args = parse_args(argv)
  out = pathlib.Path(args.output_dir).resolve()
  try:
    config = check_args(args)
  except UserInputError as e:
    _failed_before_running(args, out, str(e))
    return reporting.fail(str(e))
  out.mkdir(parents=True, exist_ok=True)

  from filelock import FileLock, Timeout

  lock = FileLock(str(out / ".run.lock"))
  try:
    lock.acquire(timeout=0)
  except Timeout:
    reporting.fail(
      f"another run_local.py is already using {out}; wait for it to finish or pass another "
      "--output-dir."
    )
    return EXIT_BUSY
  except OSError as e:
    return reporting.fail(
      f"cannot lock {out / '.run.lock'} ({e.strerror}); pass another --output-dir."
    )
  try:
    with scratch.run_folder():
      return _run(args, config, out)
  finally:
    lock.release()


def _failed_before_running(args, out: pathlib.Path, error: str) -> None:
  """Records and reports a night that failed its up-front checks (a cron job's night too).

  Nothing is recorded where the serving folder does not exist yet (a first run with a
  mistake), and nobody is notified when the --notify values are themselves the mistake.
  """
  # Recording the night imports TFX: TensorFlow's start-up lines would follow the one error line.
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  serving, model, targets = night_target(args, out)
  nobody = not targets and not heartbeat(args)
  if nobody and (storage.is_remote(serving) or not (pathlib.Path(serving) / model).is_dir()):
    return
  from components.nights import nights_lib

  # Under the nightly job the night already has its id (the job's log names it).
  record, notices = nights_lib.end_night(
    serving,
    model,
    os.environ.get(nights_lib.NIGHT_ID_ENV) or nights_lib.new_night_id(),
    succeeded=False,
    error=error,
    notify=targets,
    every_night=args.notify_every_night,
    heartbeat=heartbeat(args),
    owner=nights_lib.local_owner(str(out)),
  )
  for notice in notices:
    if not notice["ok"]:
      print(f"warning: could not notify {notice['target']}: {notice['error']}", file=sys.stderr)
  if (out / "run_summary.json").is_file():
    # The last run's pages would still say how that run went: they now say this one failed.
    summary = {"status": "failed", "error": error, "night": record, "notifications": notices}
    _write_summary(out, summary)
    _write_pages(out, summary, serving, model)


def night_target(args, out: pathlib.Path) -> tuple[str, str, list[str]]:
  """Where a night of these flags is recorded, and who is told: (serving folder, model name,
  notify targets); no targets when the --notify values are themselves a mistake."""
  from components.nights import notify_lib

  serving = _location(args.serving_dir, out / "serving")
  model = args.model_name or resolve.default_model_name(args.data_root)
  try:
    targets = [t.text for t in notify_lib.parse_targets(args.notify)]
  except UserInputError:
    targets = []
  return serving, model, targets


def heartbeat(args) -> str:
  """The --heartbeat target of these flags; '' when there is none or it is the mistake."""
  from components.nights import notify_lib

  try:
    return notify_lib.parse_target(args.heartbeat).text if args.heartbeat else ""
  except UserInputError:
    return ""


def _location(value: str | None, default: pathlib.Path) -> str:
  if value is None:
    return str(default)
  return value if storage.is_remote(value) else str(pathlib.Path(value).resolve())


@dataclasses.dataclass
class _Started:
  """A run under way: its metadata store, pipeline, live table and night."""

  store: Any
  pipeline: Any
  table: progress.RunTable
  started_ms: int
  started: float
  night: str
  night_started: str
  cleanup: Any
  # Whether this run named its night (no nightly job above it, which records a night it stops).
  own_night: bool = True


def _run(args, config, out: pathlib.Path) -> int:
  log = progress.log_path(out)
  with progress.captured_output(log, args.verbose) as terminal:
    progress.configure_logging(args.verbose)
    run = _start(args, config, out)
    with progress.live_table(run.table, terminal, args.quiet):
      failure, error = _execute(run, config, out)
    if failure is not None and error is None:
      # A bug of ours: its traceback goes to the log here, and to the terminal below.
      logging.getLogger(__name__).error("The run failed in the project's code.", exc_info=failure)
    summary = _summarize(run, config, log, failure, error)
    _write_summary(out, summary)
    report = _write_pages(out, summary, config.serving_dir, config.model_name)
    from rich.console import Console

    console = Console(file=terminal, width=110)
    console.print(progress.summary_lines(summary, run.table, out, str(log), report))
  if failure is not None and error is None:
    # A bug of ours: its traceback goes to the terminal as well as the log.
    raise failure
  if isinstance(failure, run_signals.STOPS):
    print(f"error: {error}", file=sys.stderr)
    return 128 + run_signals.signal_of(failure)
  if failure is not None:
    reporting.print_user_traceback(failure)
  if error:
    print(f"error: {error}", file=sys.stderr)
  return 0 if summary["status"] == "succeeded" else 1


def _start(args, config, out: pathlib.Path) -> _Started:
  """Registers file systems, recovers from a killed run, builds the pipeline and its table."""
  from components import tf_compat

  # Before anything imports TFX, which imports keras_tuner.
  tf_compat.keras_tuner_on_tf_keras()
  tf_compat.install_user_modules_once()
  tf_compat.tfx_package_only_for_remote_beam()
  tf_compat.register_filesystems(
    [config.data_root, config.pipeline_root, config.serving_dir, config.module_file]
  )
  from ml_metadata import metadata_store
  from tfx.orchestration import metadata

  from components.live_model import live_model_lib
  from components.nights import nights_lib
  from components.serving import layout
  from pipeline.cli import recovery
  from pipeline.cli import summary as summary_lib
  from pipeline.definition.factory import create_pipeline

  connection = metadata.sqlite_metadata_connection_config(str(out / "metadata.sqlite"))
  store = metadata_store.MetadataStore(connection)
  cleanup = recovery.fail_abandoned_executions(store, config.pipeline_name, config.pipeline_root)
  beam_args = list(args.beam_arg)
  if args.direct_workers:
    beam_args += [
      "--direct_running_mode=multi_processing",
      f"--direct_num_workers={args.direct_workers}",
    ]
  live_key = live_model_lib.live_model_key(  # check_args checked the live version's files.
    config.serving_dir,
    config.model_name,
    config.pipeline_name,
    verify=False,
    settings=config.settings_fingerprint(),
  )
  pipeline = create_pipeline(config, connection, beam_args, live_key=live_key)
  names = [n for n in nodes.RUN_ORDER if n in {c.id for c in pipeline.components}]
  names += [c.id for c in pipeline.components if c.id not in names]
  started_ms = int(time.time() * 1000) - 1
  # The nightly job names the night (it records it if the run times out); else a new one.
  own_night = not os.environ.get(nights_lib.NIGHT_ID_ENV)
  night = os.environ.get(nights_lib.NIGHT_ID_ENV) or nights_lib.new_night_id()
  night_started = layout.utc_now()
  os.environ[nights_lib.NIGHT_ID_ENV] = night
  os.environ[nights_lib.NIGHT_OWNER_ENV] = nights_lib.local_owner(str(out))
  _begin_night(config, night)
  table = progress.RunTable(
    names, lambda name: summary_lib.result_line(store, config.pipeline_name, name, started_ms)
  )
  return _Started(
    store, pipeline, table, started_ms, time.monotonic(), night, night_started, cleanup, own_night
  )


def _begin_night(config, night: str) -> None:
  """Opens the night; this run holds the output folder's lock, so an open night of its own
  left by a killed run is dead and is closed as interrupted now."""
  from components.nights import nights_lib, span_notes

  owner = os.environ[nights_lib.NIGHT_OWNER_ENV]
  try:
    for record in nights_lib.begin_night(config.serving_dir, config.model_name, night, owner):
      logging.warning("Night %s: %s.", record["night"], record["line"])
    notes = span_notes.night_notes(
      config.data_root,
      config.input_pattern,
      config.serving_dir,
      config.model_name,
      config.rolling_spans,
      config.stale_after_s,
    )
    if notes:
      logging.warning("Data: %s.", "; ".join(notes))
      facts = {nights_lib.NOTES_FIELD: notes}
      nights_lib.record_step(config.serving_dir, config.model_name, nights_lib.DATA_STEP, facts)
  except Exception as e:  # Recording is not the run: the Pusher reports an unwritable folder.
    logging.warning("The night could not be opened in %s: %s", config.serving_dir, e)


def _execute(run: _Started, config, out: pathlib.Path) -> tuple[BaseException | None, str | None]:
  """Runs the pipeline; returns the exception it raised and its one-line user error, if any."""
  from tfx.orchestration.local.local_dag_runner import LocalDagRunner

  from components import memory
  from pipeline.definition.factory import local_ir

  memory.freeze_imports(RUN_IMPORTS)
  try:
    with run_signals.stop_on_signals(run.own_night):
      LocalDagRunner().run_with_ir(local_ir(run.pipeline))
  except run_signals.STOPS as e:
    run.table.mark_failed()
    return e, run_signals.describe(e)
  except Exception as e:
    run.table.mark_failed()
    failure: BaseException = e
    user_files = [config.module_file, config.transform_module]
    folders = {
      "--output-dir": str(out),
      "--serving-dir": config.serving_dir,
      "--pipeline-root": config.pipeline_root,
    }
    error = reporting.user_error_message(e, str(out), user_files, folders)
    code_error = None
    if error is None:
      code_error = reporting.user_code_error(e, user_files)
    if code_error is not None:
      failure, error = code_error, str(code_error)
    return failure, error
  return None, None


def _summarize(run: _Started, config, log: pathlib.Path, failure, error) -> dict:
  """run_summary.json's content, the night closed and recorded (and notified) with it."""
  from components.nights import nights_lib
  from pipeline.cli import summary as summary_lib

  summary = summary_lib.build_summary(run.store, config.pipeline_name, run.started_ms, error)
  summary["seconds"] = round(time.monotonic() - run.started, 2)
  summary["config"] = dataclasses.asdict(config)
  if summary.get("task") is None and summary.get("components"):
    # A run_fn module's model names no task; the run's own decision is the task it ran.
    summary["task"] = config.task
  summary["log"] = str(log)
  if run.cleanup:
    summary["cleanup"] = run.cleanup
  if failure is not None and error is None:
    summary["status"] = "failed"
    summary["error"] = "internal error, see the traceback in the log"
  if any(c["name"] == nodes.DATA_GATE and c["state"] == "cached" for c in summary["components"]):
    # Tonight's gate is an earlier run's: a night killed after its gate left its facts.
    try:
      carried = nights_lib.use_carried_gate(config.serving_dir, config.model_name, run.night)
      # A push relied on the reused gate: its record shows it. (Nights with no new data keep
      # none, so that one night's drift does not count once per night in the gate's bands.)
      if not carried and (summary.get("pushed") or {}).get("pushed"):
        reused = summary_lib.reused_gate_facts(summary)
        if reused is not None:
          nights_lib.record_step(
            config.serving_dir, config.model_name, nights_lib.GATE_STEP, reused, run.night
          )
    except Exception as e:  # Recording is not the run: the record then shows no gate.
      logging.getLogger(__name__).warning("The gate's facts were not carried over: %s", e)
  stopped = isinstance(failure, run_signals.STOPS)
  record, notices = nights_lib.end_night(
    config.serving_dir,
    config.model_name,
    run.night,
    succeeded=summary["status"] == "succeeded",
    error=summary.get("error") or "",
    started=run.night_started,
    seconds=summary["seconds"],
    outcome=nights_lib.INTERRUPTED if stopped else None,
    notify=config.notify,
    every_night=config.notify_every_night,
    heartbeat=config.heartbeat,
    # Where the night could not be opened (its serving folder full), the record still names
    # who ran it; it had no owner, and history showed a "run from" column for it.
    owner=os.environ.get(nights_lib.NIGHT_OWNER_ENV, ""),
  )
  os.environ.pop(nights_lib.NIGHT_ID_ENV, None)
  os.environ.pop(nights_lib.NIGHT_OWNER_ENV, None)
  if record["outcome"] in (nights_lib.STOPPED, nights_lib.INTERRUPTED):
    summary["status"] = record["outcome"]
  summary["night"] = record
  summary["notifications"] = notices
  return summary


def _write_pages(out: pathlib.Path, summary: dict, serving_dir: str, model_name: str) -> str:
  """Writes report.html, and nights.html where the serving folder keeps a nights log.

  Returns:
    What the summary's last line says of the page: its path, or why it was not written.
  """
  import logging

  try:
    from components.report import nights_page, run_page

    path = run_page.write_run_page(str(out), summary)
  except Exception as e:  # The page shows the run; a fault in it must not fail the run.
    logging.warning("The report page was not written: %s", e, exc_info=True)
    return f"not written ({type(e).__name__}: {e}; see the log)"
  try:
    from components.serving import nights
    from pipeline.cli import nights as nights_cli

    if nights.read_records(serving_dir, model_name):
      nights_cli.write_html(serving_dir, model_name, str(out / nights_page.NIGHTS_PAGE), str(out))
  except Exception as e:  # As above: the nights page is a view.
    logging.warning("The nights page was not written: %s", e, exc_info=True)
  return path


def _write_summary(out: pathlib.Path, summary: dict) -> None:
  tmp = out / "run_summary.json.tmp"
  try:
    tmp.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    tmp.replace(out / "run_summary.json")
  except OSError as e:
    if not reporting.is_disk_full(e):
      raise
    # The run's error line already says the disk is full; leave no half-written summary.
    tmp.unlink(missing_ok=True)
