"""Schedules the pipeline nightly: a KFP recurring run, or a local crontab entry.

Usage:
  python pipeline/schedule.py kubeflow --cron "0 2 * * *" --experiment E --job-name J \\
      (--package pipeline.json | --compile [run_kubeflow.py options: --image, --pipeline-root,
      --serving-dir, pipeline flags ...]) [--host URL] [--token-file F] [--namespace NS] \\
      [--seconds-field] [--dry-run]
  python pipeline/schedule.py local install --cron "0 2 * * *" --output-dir D \\
      [--time-limit 6h] [--job-name J] [--crontab-file F] [-- run_local.py args ...]
  python pipeline/schedule.py local list|remove|run-now --output-dir D [--job-name J] \\
      [--crontab-file F]
  python pipeline/schedule.py local status --output-dir D [--grace 1h] [--job-name J] \\
      [--crontab-file F]
  python pipeline/schedule.py local history (--output-dir D | --serving-dir S) [--model-name M] \\
      [--json] [--last N] [--html PATH]
  python pipeline/schedule.py local accept (--output-dir D | --serving-dir S) [--model-name M] \\
      --columns C1,C2 --reason "..."
  python pipeline/schedule.py local unaccept (--output-dir D | --serving-dir S) [--model-name M] \\
      --columns C1,C2|all

`history` prints the nights recorded in the serving folder (local or gs://, s3://): spans, rows,
the data gate's verdict, the metric against the live model, what was pushed, the outcome.
`accept` records that tonight's changes to some columns (each a column of the live version or
of tonight's data) are deliberate, with the reason and who accepted, so the data gate lets them
through until another version goes live; `unaccept` takes that back (`all`: every column).

KFP reads cron as six fields, seconds first (robfig/cron v1); the standard five-field form
given here is converted (``0 2 * * *`` -> ``0 0 2 * * *``) and the next run times are printed.
KFP host: --host, $KFP_HOST, else kfp's defaults ($KF_PIPELINES_ENDPOINT, in-cluster, kube
config). Credentials: --token-file, $KFP_TOKEN, $KF_PIPELINES_SA_TOKEN_PATH, else kfp's
defaults. Tokens are never printed nor written to the package. Before the kfp client is built,
``<host>/apis/v2beta1/healthz`` is asked once (5 s timeout), so that a wrong host is one line.

`run-now` runs the installed job at once, exactly as cron would (the same line, lock, log,
environment and exit status). `status` prints the last night in one line and exits 1 when a
night the schedule expected has not begun within the grace, or the last one did not end well;
a monitor or a second cron line can run it. The crontab line runs `local night`: one night
under the job's lock and time limit, a skipped or timed-out night recorded and notified.

`local install` writes one block, ``# BEGIN tfx-pipeline-kit <job>`` / the cron line /
``# END tfx-pipeline-kit <job>``, replacing that job's block and keeping every other line;
`local remove` deletes exactly that block. A value with a control character (a line feed would
start another crontab line) is refused, for both targets, before anything is read or written.
"""

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from core.errors import UserInputError
from pipeline.cli import local_jobs
from pipeline.cli.flags import ArgumentParser
from pipeline.cli.scheduling import cron, kfp_client, kfp_health
from pipeline.cli.scheduling import crontab as crontab_lib
from pipeline.definition.config import REPO_ROOT

DEFAULT_BUILD_DIR = REPO_ROOT / "build" / "schedule"
# `local` actions over the output folder's crontab job (`local_jobs`).
JOB_ACTIONS = ("install", "list", "remove", "run-now", "status", "night")
# `local` actions over the serving folder's nights rather than the crontab.
NIGHTS_ACTIONS = ("history", "accept", "unaccept")


def _build_parser() -> argparse.ArgumentParser:
  parser = ArgumentParser(
    prog="schedule.py", description=__doc__.splitlines()[0], allow_abbrev=False
  )
  targets = parser.add_subparsers(dest="target", required=True, parser_class=ArgumentParser)

  kfp = targets.add_parser("kubeflow", help="Create or replace a KFP recurring run.")
  _add_cron_flags(kfp, required=True)
  kfp.add_argument("--experiment", required=True, help="Experiment name (created if missing).")
  kfp.add_argument("--job-name", required=True, help="Recurring run name; rerun replaces it.")
  source = kfp.add_mutually_exclusive_group(required=True)
  source.add_argument("--package", help="Compiled pipeline (.json from TFX, or KFP .yaml).")
  source.add_argument(
    "--compile",
    action="store_true",
    help="Compile with pipeline/run_kubeflow.py first; its options (--image, --pipeline-root, "
    "--serving-dir, pipeline flags) may follow.",
  )
  kfp.add_argument("--host", help="KFP API endpoint (default: $KFP_HOST or kfp's defaults).")
  kfp.add_argument("--token-file", help="File holding a bearer token (never pass the token).")
  kfp.add_argument("--namespace", help="Kubernetes namespace (multi-user KFP).")
  kfp.add_argument(
    "--build-dir", default=str(DEFAULT_BUILD_DIR), help="Where compiled packages are written."
  )
  kfp.add_argument(
    "--dry-run", action="store_true", help="Compile/convert and print; contact no server."
  )

  local = targets.add_parser(
    "local", help="Manage a crontab entry running run_local.py; read the nights; accept a change."
  )
  local.add_argument("action", choices=[*JOB_ACTIONS, *NIGHTS_ACTIONS])
  _add_cron_flags(local, required=False)
  local_jobs.add_flags(local)
  local.add_argument("--output-dir", help="Pipeline output folder (lock, logs, serving/).")
  local.add_argument(
    "--serving-dir",
    help="history, accept, unaccept: the serving folder (default: <output-dir>/serving).",
  )
  local.add_argument(
    "--model-name",
    help="history, accept, unaccept: the model (default: the only one in the folder).",
  )
  local.add_argument("--json", action="store_true", help="history: one JSON record per line.")
  local.add_argument("--last", type=int, help="history: only the last N nights.")
  local.add_argument(
    "--html", metavar="PATH", help="history: also write the nights page (HTML) to PATH."
  )
  local.add_argument(
    "--columns",
    help="accept, unaccept: comma-separated columns, :row_count, :repeated_data, or all.",
  )
  local.add_argument("--reason", default="", help="accept: why the change is deliberate.")
  local.add_argument("--job-name", help="Entry name (default: derived from --output-dir).")
  local.add_argument("--crontab-file", help="Edit this file instead of the user's crontab.")
  local.add_argument(
    "--python",
    help="install: interpreter for the job (default: the repo's .venv); night: for "
    "run_local.py (default: the one running this).",
  )
  return parser


def _add_cron_flags(parser: argparse.ArgumentParser, required: bool) -> None:
  parser.add_argument(
    "--cron", required=required, help="Five-field cron ('0 2 * * *') or @daily etc."
  )
  parser.add_argument(
    "--seconds-field",
    action="store_true",
    help="--cron has six fields, seconds first (KFP's own form).",
  )


def _print_schedule(spec: cron.CronSpec, where: str, local_cron: bool = False) -> None:
  print(f"Schedule {spec.source!r}: {where}")
  print("Next runs:")
  for line in cron.describe_next_runs(spec, local_cron=local_cron):
    print(f"  {line}")


def _compile(args: argparse.Namespace, compile_argv: Sequence[str]) -> str:
  try:
    from pipeline.cli import flags
    from pipeline.cli import kubeflow as run_kubeflow
  except ImportError as e:
    raise cron.ScheduleError(
      f"Cannot import pipeline/run_kubeflow.py ({e}); compile the pipeline yourself and pass "
      "--package FILE."
    ) from e
  # run_kubeflow.py's own flags, so `schedule.py kubeflow --compile` accepts what it accepts.
  parser = ArgumentParser(prog="schedule.py kubeflow --compile")
  run_kubeflow.add_kubeflow_args(parser)
  flags.add_pipeline_args(parser)
  compile_args = parser.parse_args(list(compile_argv))
  try:
    run_kubeflow.check_kubeflow_args(compile_args)
    config = run_kubeflow.kubeflow_config(compile_args)
    run_kubeflow.check_target(compile_args.target, config)
  except ValueError as e:
    raise cron.ScheduleError(str(e)) from e
  for line in run_kubeflow.compile_warnings(compile_args, config, compile_args.volume):
    print(f"warning: {line}", file=sys.stderr)
  # As run_kubeflow.py compiles: TFX's INFO chatter stays out of the terminal.
  from pipeline.cli import progress

  progress.configure_logging(verbose=False)
  logging.getLogger().setLevel(logging.WARNING)
  os.makedirs(args.build_dir, exist_ok=True)
  output = os.path.join(os.path.abspath(args.build_dir), f"{args.job_name}.json")
  run_kubeflow.compile_from_args(output, compile_args, config)
  print(f"Compiled {output} (image {compile_args.image})")
  return output


def _make_client(args: argparse.Namespace) -> Any:
  host, what = kfp_client.host_source(args.host, os.environ)
  creds = kfp_client.resolve_credentials(args.token_file, os.environ)
  print(f"KFP host: {kfp_client.redact_host(host)}; credentials: {creds.describe()}")
  if host:
    token = creds.existing_token
    if creds.token_path and os.path.isfile(creds.token_path):
      with open(creds.token_path, encoding="utf-8") as f:
        token = f.read().strip()
    kfp_health.check_kfp_health(host, what=what, token=token)
  import kfp  # After the check: a wrong host fails before this slow import.
  from kfp.client import set_volume_credentials

  class _Client(kfp.Client):
    """kfp.Client whose constructor asks /healthz once instead of 5 times, 5 s apart."""

    def get_kfp_healthz(self, sleep_duration: int = 5) -> Any:
      del sleep_duration  # No retries: check_kfp_health has already waited for an answer.
      return self._healthz_api.get_healthz()

  credentials = None
  if creds.token_path:
    credentials = set_volume_credentials.ServiceAccountTokenVolumeCredentials(creds.token_path)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # "only works with KFP >= 2.0.0-beta.2"
    return _Client(
      host=kfp_client.resolve_host(args.host, os.environ),
      existing_token=creds.existing_token,
      credentials=credentials,
      namespace=args.namespace or "kubeflow",
    )


@contextlib.contextmanager
def _quiet_kfp_logs() -> Iterator[None]:
  """Keeps urllib3's connection-retry warnings off the terminal; errors are reported once."""
  logger = logging.getLogger("urllib3")
  level = logger.level
  logger.setLevel(logging.ERROR)
  try:
    yield
  finally:
    logger.setLevel(level)


def _kubeflow(args: argparse.Namespace, compile_argv: Sequence[str]) -> int:
  spec = cron.parse_cron(args.cron, seconds_field=args.seconds_field)
  cron.validate_job_name(args.job_name)
  if not args.dry_run:
    # Settings from the environment, checked before anything is compiled or written.
    kfp_client.host_source(args.host, os.environ)
    kfp_client.resolve_credentials(args.token_file, os.environ)
  _print_schedule(
    spec,
    f"KFP cron {spec.kfp!r} (six fields, seconds first, as robfig/cron v1 reads them; "
    "KFP evaluates it in its controller's time zone, UTC by default)",
  )
  compiled = _compile(args, compile_argv) if args.compile else args.package
  package, runtime = kfp_client.kfp_package_from_tfx(compiled, args.build_dir)
  print(f"Pipeline package: {package}")
  if args.dry_run:
    print("Dry run: no recurring run created.")
    return 0
  with _quiet_kfp_logs():
    client = _make_client(args)
    run = kfp_client.upsert_recurring_run(
      client,
      experiment=args.experiment,
      job_name=args.job_name,
      cron=spec,
      package_path=package,
      namespace=args.namespace,
      pipeline_root=runtime.get("pipeline_root"),
      params=runtime.get("params"),
    )
  print(
    f"Recurring run {args.job_name!r} ({run.recurring_run_id}) scheduled in experiment "
    f"{args.experiment!r}: cron {spec.kfp!r}, max_concurrency=1, no catch-up."
  )
  return 0


def _nights(args: argparse.Namespace) -> int:
  from components import storage
  from pipeline.cli import nights

  if not (args.serving_dir or args.output_dir):
    raise cron.ScheduleError(f"local {args.action} needs --output-dir or --serving-dir.")
  ran_with = nights.run_target(args.output_dir)
  serving = args.serving_dir or ran_with[0] or os.path.join(args.output_dir, "serving")
  if not storage.is_remote(serving):
    serving = os.path.abspath(serving)
  else:
    from components import tf_compat

    tf_compat.register_filesystems([serving])
  given = args.model_name or (ran_with[1] if not args.serving_dir else None)
  model = nights.model_name_in(serving, given, args.output_dir)
  if args.action == "history":
    if args.last is not None and args.last < 1:
      raise cron.ScheduleError(f"--last must be at least 1, got {args.last}.")
    if args.html:
      page = nights.write_html(serving, model, args.html, args.output_dir, last=args.last)
      print(f"nights page: {page}", file=sys.stderr if args.json else sys.stdout)
    return nights.print_history(serving, model, as_json=args.json, last=args.last)
  from pipeline.cli import acceptance

  if args.action == "unaccept":
    return acceptance.unaccept(serving, model, [args.columns or ""])
  return acceptance.accept(serving, model, [args.columns or ""], args.reason)


def _local(args: argparse.Namespace, run_local_args: list[str]) -> int:
  if args.action in NIGHTS_ACTIONS:
    return _nights(args)
  if not args.output_dir:
    raise cron.ScheduleError(f"local {args.action} needs --output-dir (the job's output folder).")
  output_dir = os.path.abspath(args.output_dir)
  job = cron.validate_job_name(args.job_name or crontab_lib.default_job_name(output_dir))
  return local_jobs.run(args, run_local_args, output_dir, job)


def main(argv: Sequence[str] | None = None) -> int:
  """Runs the CLI.

  Args:
    argv: Arguments without the program name; defaults to sys.argv[1:]. For `local`,
      arguments after ``--`` are passed to run_local.py.

  Returns:
    The process exit status.
  """
  argv = list(sys.argv[1:] if argv is None else argv)
  try:
    _reject_control_chars_in_argv(argv)
  except cron.ScheduleError as e:
    print(f"schedule.py: error: {e}", file=sys.stderr)
    return 1
  extra: list[str] = []
  if "--" in argv:
    at = argv.index("--")
    argv, extra = argv[:at], argv[at + 1 :]
  parser = _build_parser()
  args, unknown = parser.parse_known_args(argv)
  if unknown and not (args.target == "kubeflow" and args.compile):
    parser.error(f"unrecognized arguments: {' '.join(unknown)}")
  if extra and args.target != "local":
    parser.error("arguments after -- are only for 'local' (run_local.py options)")
  try:
    if args.target == "kubeflow":
      return _kubeflow(args, unknown)
    return _local(args, extra)
  except UserInputError as e:  # ScheduleError and the run_local.py checks' CheckError.
    message = str(e)
  except BrokenPipeError:  # The reader of the output went away (`| head`), as for a shell tool.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit.
    return 128 + signal.SIGPIPE
  except OSError as e:
    message = f"{e.strerror}: {e.filename}"
  except Exception as e:  # Server and network errors from the KFP client; others re-raise.
    message = _kfp_error_message(e)
    if message is None:
      raise
  print(f"schedule.py: error: {' '.join(message.splitlines())}", file=sys.stderr)
  return 1


def _reject_control_chars_in_argv(argv: Sequence[str]) -> None:
  """Refuses any argument with a control character, naming the flag it belongs to.

  Every value may end up in a crontab line (where a line feed starts a new job) or in a KFP
  request, so all of them are checked, before anything is read, written or sent.
  """
  dashdash = None
  for index, arg in enumerate(argv):
    if arg == "--" and dashdash is None:
      dashdash = index
      continue
    if cron.control_char_problem(arg) is None:
      continue
    flag, _, value = arg.partition("=")
    previous = argv[index - 1] if index > 0 else ""
    what = None
    if arg.startswith("--") and value and cron.control_char_problem(flag) is None:
      what = flag  # --flag=value: positions are counted in the value.
    else:
      value = arg
      if previous.startswith("-") and "=" not in previous and not arg.startswith("-"):
        what = previous
    if dashdash is None:
      what = what or f"argument {index + 1}"
    else:
      what = f"{what} (after --)" if what else f"argument {index - dashdash} after --"
    cron.reject_control_chars(value, what)


def _kfp_error_message(error: Exception) -> str | None:
  """One line for errors a KFP server or the network caused; None for anything else."""
  kfp_server_api = sys.modules.get("kfp_server_api")
  if kfp_server_api is not None and isinstance(error, kfp_server_api.ApiException):
    detail = ""
    try:
      detail = json.loads(error.body or "{}").get("message", "")
    except (ValueError, AttributeError):
      detail = ""
    hint = " (check --token-file / $KFP_TOKEN)" if error.status in (401, 403) else ""
    return f"KFP API returned {error.status} {error.reason}{hint}: {detail}".rstrip(": ")
  urllib3 = sys.modules.get("urllib3")
  if urllib3 is not None and isinstance(error, urllib3.exceptions.HTTPError):
    return f"cannot reach KFP ({type(error).__name__}); check --host or $KFP_HOST."
  return None
