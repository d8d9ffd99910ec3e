"""Plain-Python helpers for nightly scheduling: cron conversion for KFP, crontab entries, KFP jobs.

Cron dialects differ in a way that silently breaks schedules: KFP's backend parses cron with
robfig/cron v1, whose fields are ``second minute hour day-of-month month [day-of-week]``.
A standard five-field ``0 2 * * *`` handed to KFP unchanged is read as "second 0 of minute 2
of every hour", i.e. hourly. `to_kfp_cron` therefore converts the standard form to the
six-field, seconds-first form (``0 0 2 * * *``).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from croniter import croniter

CRONTAB_MARKER = "# tfx-pipeline-kit job="
_JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_FIELD_RE = re.compile(r"^[0-9A-Za-z*?/,#-]+$")
_NAMES_RE = re.compile(
  r"JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC|SUN|MON|TUE|WED|THU|FRI|SAT"
)
# Descriptors as robfig/cron v1 defines them, written out in the six-field form KFP stores.
_DESCRIPTORS_6 = {
  "@yearly": "0 0 0 1 1 *",
  "@annually": "0 0 0 1 1 *",
  "@monthly": "0 0 0 1 * *",
  "@weekly": "0 0 0 * * 0",
  "@daily": "0 0 0 * * *",
  "@midnight": "0 0 0 * * *",
  "@hourly": "0 0 * * * *",
}


class ScheduleError(Exception):
  """A scheduling problem the user can fix (bad cron, missing crontab, unreachable KFP)."""


@dataclasses.dataclass(frozen=True)
class CronSpec:
  """A validated schedule.

  Attributes:
    source: What the user typed.
    five_field: The standard five-field form (minute first), or None for a seconds schedule.
    kfp: The six-field, seconds-first form that KFP (robfig/cron v1) reads as intended.
  """

  source: str
  five_field: str | None
  kfp: str


# ----------------------------------------------------------------------------- cron


def parse_cron(expr: str, seconds_field: bool = False) -> CronSpec:
  """Validates a cron schedule and returns its standard and KFP forms.

  Accepted: a standard five-field expression (``minute hour day month weekday``), a
  descriptor (``@daily``, ``@hourly``, ``@weekly``, ``@monthly``, ``@yearly``/``@annually``,
  ``@midnight``), or - only with ``seconds_field=True`` - a six-field, seconds-first
  expression as KFP stores it. Six fields without the flag are refused because other tools
  use six fields differently (AWS puts a year last), so guessing could shift the schedule.

  Args:
    expr: The schedule.
    seconds_field: Whether `expr` is six-field, seconds first.

  Returns:
    A `CronSpec`.

  Raises:
    ScheduleError: If the expression is invalid or uses syntax robfig/cron v1 lacks.
  """
  source = expr
  text = " ".join((expr or "").split())
  if not text:
    raise ScheduleError("Empty cron expression: pass e.g. --cron '0 2 * * *' (02:00 daily).")
  if text.startswith("@"):
    if seconds_field:
      raise ScheduleError(f"--seconds-field does not apply to the descriptor {text!r}; drop it.")
    six = _DESCRIPTORS_6.get(text.lower())
    if six is None:
      raise ScheduleError(
        f"Unsupported cron descriptor {text!r}: use one of {', '.join(sorted(_DESCRIPTORS_6))} "
        "or a five-field expression."
      )
    return CronSpec(source, six.split(" ", 1)[1], six)
  fields = text.split(" ")
  for field in fields:
    if not _FIELD_RE.match(field):
      raise ScheduleError(f"Invalid cron field {field!r} in {text!r}.")
  if seconds_field:
    if len(fields) != 6:
      raise ScheduleError(
        f"--seconds-field expects six fields (second minute hour day month weekday); "
        f"{text!r} has {len(fields)}."
      )
    six = text
  elif len(fields) == 5:
    six = "0 " + text
  elif len(fields) == 6:
    raise ScheduleError(
      f"{text!r} has six fields: if the first is seconds (KFP's own form) add --seconds-field; "
      "for a standard schedule pass five fields (minute hour day month weekday)."
    )
  else:
    raise ScheduleError(
      f"{text!r} has {len(fields)} fields; pass five (minute hour day month weekday), "
      "e.g. '0 2 * * *'."
    )
  _check_robfig_compatible(six)
  try:
    croniter(six, _now_utc(), second_at_beginning=True)
  except (ValueError, KeyError) as e:  # croniter's errors subclass ValueError.
    raise ScheduleError(f"Invalid cron expression {text!r}: {e}") from e
  five = six.split(" ", 1)[1] if six.split(" ", 1)[0] == "0" else None
  return CronSpec(source, five, six)


def _check_robfig_compatible(six: str) -> None:
  # croniter accepts extensions that KFP's robfig/cron v1 rejects at submission or, worse,
  # reads differently; refuse them here with the fix.
  without_names = re.sub(_NAMES_RE, "", six.upper())
  if re.search(r"[A-Z#]", without_names):
    raise ScheduleError(
      f"{six!r} uses L, W, #, H or an unknown name, which KFP's cron parser (robfig/cron v1) "
      "does not support; use plain numbers, ranges, lists and steps."
    )
  weekday = six.split(" ")[5]
  if re.search(r"(^|[,-])7([^0-9]|$)", weekday):
    raise ScheduleError(
      f"Weekday 7 in {six!r} is not valid for KFP's cron parser; use 0 for Sunday."
    )


def next_runs(
  spec: CronSpec,
  count: int = 3,
  start: datetime.datetime | None = None,
  tz: datetime.tzinfo | None = datetime.timezone.utc,
) -> list[datetime.datetime]:
  """Computes the next run times of a schedule with croniter.

  Args:
    spec: The schedule.
    count: How many run times.
    start: Time to count from (timezone-aware); defaults to now.
    tz: Time zone the schedule is evaluated in: UTC for KFP (its controller's default),
      None for this machine's local zone (the system cron daemon).

  Returns:
    Timezone-aware datetimes in `tz`, ascending.
  """
  start = (start or _now_utc()).astimezone(tz)
  it = croniter(spec.kfp, start, second_at_beginning=True)
  return [it.get_next(datetime.datetime) for _ in range(count)]


def robfig_reading_next_runs(
  expr: str, count: int = 3, start: datetime.datetime | None = None
) -> list[datetime.datetime]:
  """Next run times of `expr` as KFP would read it if it were passed through unconverted.

  robfig/cron v1 reads five fields as ``second minute hour day month`` (weekday = ``*``).

  Args:
    expr: A five- or six-field expression.
    count: How many run times.
    start: Time to count from (timezone-aware); defaults to now.

  Returns:
    Timezone-aware UTC datetimes, ascending.
  """
  fields = expr.split()
  if len(fields) == 5:
    fields.append("*")
  start = start or _now_utc()
  it = croniter(" ".join(fields), start, second_at_beginning=True)
  return [it.get_next(datetime.datetime) for _ in range(count)]


def describe_next_runs(spec: CronSpec, count: int = 3, local_cron: bool = False) -> list[str]:
  """Formats the next run times in UTC, plus local time when the machine is not on UTC.

  Args:
    spec: The schedule.
    count: How many run times.
    local_cron: Evaluate the schedule in local time (system cron) instead of UTC (KFP).

  Returns:
    One line per run.
  """
  lines = []
  for when in next_runs(spec, count, tz=None if local_cron else datetime.timezone.utc):
    utc = when.astimezone(datetime.timezone.utc)
    local = when.astimezone()
    line = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    if local.utcoffset() != datetime.timedelta(0):
      line += local.strftime(" (%Y-%m-%d %H:%M:%S %Z local)")
    lines.append(line)
  return lines


def _now_utc() -> datetime.datetime:
  return datetime.datetime.now(datetime.timezone.utc)


# ----------------------------------------------------------------------------- crontab


def validate_job_name(name: str) -> str:
  """Checks a job name used in crontab markers and KFP display names.

  Args:
    name: The job name.

  Returns:
    The name.

  Raises:
    ScheduleError: If it is empty or has characters other than letters, digits, ``._-``.
  """
  if not isinstance(name, str) or not _JOB_NAME_RE.match(name):
    raise ScheduleError(f"Invalid job name {name!r}: use 1-128 letters, digits, '.', '_' or '-'.")
  return name


def default_job_name(output_dir: str) -> str:
  """Derives a stable job name from the output folder, so each folder has one nightly entry.

  Args:
    output_dir: The pipeline output folder.

  Returns:
    ``nightly-<basename>-<8 hex chars of the absolute path's sha256>``.
  """
  path = os.path.abspath(output_dir)
  base = re.sub(r"[^A-Za-z0-9._-]", "-", os.path.basename(path.rstrip("/")) or "root")[:40]
  return f"nightly-{base}-{hashlib.sha256(path.encode()).hexdigest()[:8]}"


def crontab_command(
  *,
  repo_root: str,
  python: str,
  output_dir: str,
  job_name: str,
  run_local_args: Sequence[str] = (),
) -> str:
  """Builds the command part of the crontab line (without the schedule).

  The job runs ``pipeline/run_local.py --output-dir D`` from the repo with the repo's
  interpreter, under ``flock -n D/.cron.lock`` so that a run still going when the next one is
  due makes the new one skip (and log that it did) instead of overlapping. Output is appended
  to ``D/logs/nightly.log``.

  Args:
    repo_root: Absolute repository root (cron starts in $HOME; we cd here).
    python: Interpreter, normally ``<repo>/.venv/bin/python``.
    output_dir: Absolute pipeline output folder (lock and logs live here).
    job_name: Marker that identifies this entry.
    run_local_args: Extra arguments for run_local.py.

  Returns:
    The command, with ``%`` escaped as crontab requires.
  """
  q = shlex.quote
  lock = os.path.join(output_dir, ".cron.lock")
  logs = os.path.join(output_dir, "logs")
  log = os.path.join(logs, "nightly.log")
  run = " ".join(
    [
      "TF_USE_LEGACY_KERAS=1",
      "flock -n -E 75",
      q(lock),
      q(python),
      "pipeline/run_local.py",
      "--output-dir",
      q(output_dir),
      *(q(a) for a in run_local_args),
    ]
  )
  skipped = f'echo "$(date -u) {job_name}: skipped, the previous run still holds the lock"'
  command = (
    f"cd {q(repo_root)} && mkdir -p {q(logs)} && {{ {run} >> {q(log)} 2>&1 || "
    f"{{ [ $? -eq 75 ] && {skipped} >> {q(log)}; }}; }} {CRONTAB_MARKER}{job_name}"
  )
  # In a crontab line an unescaped % ends the command (the rest becomes stdin).
  return command.replace("%", "\\%")


def is_our_line(line: str, job_name: str | None = None) -> bool:
  """Whether a crontab line is an entry this tool wrote (for `job_name`, if given).

  Args:
    line: One crontab line.
    job_name: Only match this job; None matches any of ours.

  Returns:
    True for our entries.
  """
  marker_at = line.rfind(CRONTAB_MARKER)
  if marker_at < 0 or line.lstrip().startswith("#"):
    return False
  return job_name is None or line[marker_at + len(CRONTAB_MARKER) :].strip() == job_name


def install_entry(crontab_text: str, schedule_five_field: str, command: str, job_name: str) -> str:
  """Returns the crontab with exactly one entry for `job_name` (replacing any old one).

  Args:
    crontab_text: The current crontab.
    schedule_five_field: Five-field schedule for the system cron daemon.
    command: From `crontab_command`.
    job_name: The job's marker name.

  Returns:
    The new crontab text; other lines are kept as they were, in order.
  """
  entry = f"{schedule_five_field} {command}"
  lines = crontab_text.splitlines()
  out, placed = [], False
  for line in lines:
    if is_our_line(line, job_name):
      if not placed:
        out.append(entry)  # Keep the entry where it was on reinstall.
        placed = True
      continue
    out.append(line)
  if not placed:
    out.append(entry)
  return "\n".join(out) + "\n"


def remove_entry(crontab_text: str, job_name: str) -> tuple[str, int]:
  """Removes this job's entries.

  Args:
    crontab_text: The current crontab.
    job_name: The job's marker name.

  Returns:
    (new crontab text, number of entries removed).
  """
  lines = crontab_text.splitlines()
  kept = [line for line in lines if not is_our_line(line, job_name)]
  text = "\n".join(kept) + "\n" if kept else ""
  return text, len(lines) - len(kept)


def list_entries(crontab_text: str) -> list[tuple[str, str, str]]:
  """Lists the entries this tool wrote.

  Args:
    crontab_text: The current crontab.

  Returns:
    (job name, five-field schedule, whole line) per entry.
  """
  entries = []
  for line in crontab_text.splitlines():
    if is_our_line(line):
      job = line[line.rfind(CRONTAB_MARKER) + len(CRONTAB_MARKER) :].strip()
      entries.append((job, " ".join(line.split()[:5]), line))
  return entries


def read_crontab(crontab_file: str | None) -> str:
  """Reads the user's crontab (``crontab -l``) or a plain crontab file.

  Args:
    crontab_file: A file to use instead of the system crontab; None for ``crontab -l``.

  Returns:
    The crontab text ("" when there is none).

  Raises:
    ScheduleError: If ``crontab`` is not installed or fails.
  """
  if crontab_file:
    try:
      with open(crontab_file, encoding="utf-8") as f:
        return f.read()
    except FileNotFoundError:
      return ""
  result = _run_crontab(["-l"])
  if result.returncode != 0:
    if "no crontab" in result.stderr.lower():
      return ""
    raise ScheduleError(f"'crontab -l' failed: {result.stderr.strip() or result.returncode}.")
  return result.stdout


def write_crontab(crontab_file: str | None, text: str) -> None:
  """Writes the user's crontab (``crontab -``) or a plain crontab file (atomically).

  Args:
    crontab_file: A file to use instead of the system crontab; None for ``crontab -``.
    text: The full crontab.

  Raises:
    ScheduleError: If ``crontab`` is not installed or rejects the table.
  """
  if crontab_file:
    directory = os.path.dirname(os.path.abspath(crontab_file))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".crontab-")
    try:
      with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
      os.replace(tmp, crontab_file)
    except BaseException:
      if os.path.exists(tmp):
        os.unlink(tmp)
      raise
    return
  result = _run_crontab(["-"], stdin=text)
  if result.returncode != 0:
    raise ScheduleError(f"'crontab -' rejected the table: {result.stderr.strip()}.")


def _run_crontab(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
  try:
    return subprocess.run(
      ["crontab", *args], input=stdin, capture_output=True, text=True, check=False, timeout=60
    )
  except FileNotFoundError as e:
    raise ScheduleError(
      "crontab: command not found; install cron (e.g. 'apt-get install cron') or pass "
      "--crontab-file FILE to manage a crontab file instead."
    ) from e


# ----------------------------------------------------------------------------- KFP


def kfp_package_from_tfx(compiled_path: str, out_dir: str) -> tuple[str, dict[str, Any]]:
  """Turns a compiled pipeline into a package the kfp 2.5 client can submit.

  TFX's KubeflowV2DagRunner writes a PipelineJob JSON (``displayName``, ``pipelineSpec``,
  ``runtimeConfig``), while ``kfp.Client.create_recurring_run`` only reads ``.yaml``,
  ``.zip`` or ``.tar.gz`` packages holding a bare PipelineSpec. This writes the PipelineSpec
  to ``<out_dir>/<name>.kfp.yaml`` (JSON is valid YAML) and returns the run-time settings.

  Args:
    compiled_path: A TFX-compiled ``.json`` or a KFP ``.yaml``/``.zip``/``.tar.gz`` package.
    out_dir: Where to write the converted package.

  Returns:
    (package path, runtime settings with optional ``pipeline_root`` and ``params``).

  Raises:
    ScheduleError: If the file is missing or not a pipeline.
  """
  if not os.path.isfile(compiled_path):
    raise ScheduleError(f"Pipeline package {compiled_path!r} does not exist; compile it first.")
  if compiled_path.endswith((".yaml", ".yml", ".zip", ".tar.gz", ".tgz")):
    return compiled_path, {}
  if not compiled_path.endswith(".json"):
    raise ScheduleError(
      f"Pipeline package {compiled_path!r} should end in .json (TFX) or .yaml/.zip/.tar.gz."
    )
  try:
    with open(compiled_path, encoding="utf-8") as f:
      doc = json.load(f)
  except json.JSONDecodeError as e:
    raise ScheduleError(f"{compiled_path} is not valid JSON ({e}).") from e
  spec = doc.get("pipelineSpec", doc) if isinstance(doc, dict) else None
  if not isinstance(spec, dict) or "root" not in spec or "pipelineInfo" not in spec:
    raise ScheduleError(f"{compiled_path} holds no pipeline spec (no pipelineInfo/root).")
  runtime = doc.get("runtimeConfig", {}) if isinstance(doc, dict) else {}
  settings: dict[str, Any] = {}
  if runtime.get("gcsOutputDirectory"):
    settings["pipeline_root"] = runtime["gcsOutputDirectory"]
  params = runtime.get("parameterValues") or runtime.get("parameters")
  if params:
    settings["params"] = params
  os.makedirs(out_dir, exist_ok=True)
  stem = os.path.basename(compiled_path)[: -len(".json")]
  out = os.path.join(out_dir, f"{stem}.kfp.yaml")
  with open(out, "w", encoding="utf-8") as f:
    json.dump(spec, f, indent=1, sort_keys=True)
    f.write("\n")
  return out, settings


@dataclasses.dataclass(frozen=True)
class Credentials:
  """How to authenticate to KFP; `describe` never includes the secret itself."""

  existing_token: str | None = None
  token_path: str | None = None
  source: str = "kfp default (in-cluster service account or kube config)"

  def describe(self) -> str:
    """Returns where the credentials came from, without the secret."""
    return self.source


def resolve_host(flag_host: str | None, environ: Mapping[str, str]) -> str | None:
  """Picks the KFP host: ``--host``, else ``$KFP_HOST``, else kfp's own defaults.

  Args:
    flag_host: The --host flag.
    environ: The environment.

  Returns:
    The host, or None to let kfp.Client use ``$KF_PIPELINES_ENDPOINT``, in-cluster DNS or
    the kube config.
  """
  return flag_host or environ.get("KFP_HOST") or None


def resolve_credentials(token_file: str | None, environ: Mapping[str, str]) -> Credentials:
  """Picks KFP credentials: ``--token-file``, ``$KFP_TOKEN``, ``$KF_PIPELINES_SA_TOKEN_PATH``.

  The token itself is never accepted as a flag (it would show up in ``ps`` and shell
  history).

  Args:
    token_file: The --token-file flag.
    environ: The environment.

  Returns:
    A `Credentials`.

  Raises:
    ScheduleError: If a named token file cannot be read.
  """
  if token_file:
    try:
      with open(token_file, encoding="utf-8") as f:
        token = f.read().strip()
    except OSError as e:
      raise ScheduleError(f"Cannot read --token-file {token_file!r}: {e.strerror}.") from e
    if not token:
      raise ScheduleError(f"--token-file {token_file!r} is empty.")
    return Credentials(existing_token=token, source=f"token file {token_file}")
  if environ.get("KFP_TOKEN"):
    return Credentials(existing_token=environ["KFP_TOKEN"], source="$KFP_TOKEN")
  if environ.get("KF_PIPELINES_SA_TOKEN_PATH"):
    path = environ["KF_PIPELINES_SA_TOKEN_PATH"]
    return Credentials(token_path=path, source=f"service-account token file {path}")
  return Credentials()


def redact_host(host: str | None) -> str:
  """Drops any user:password from a host URL before it is printed.

  Args:
    host: The host URL.

  Returns:
    The URL without credentials, or a note that kfp's default is used.
  """
  if not host:
    return "(kfp default: $KF_PIPELINES_ENDPOINT, in-cluster or kube config)"
  return re.sub(r"//[^/@]*@", "//", host)


def upsert_recurring_run(
  client: Any,
  *,
  experiment: str,
  job_name: str,
  cron: CronSpec,
  package_path: str,
  namespace: str | None = None,
  pipeline_root: str | None = None,
  params: Mapping[str, Any] | None = None,
  log: Callable[[str], None] = print,
) -> Any:
  """Creates or replaces the recurring run `job_name` in `experiment` (get-or-created).

  KFP has no update call for recurring runs. To avoid both duplicates and a window without
  a schedule, the new run is created *disabled*, then every older run of the same name in the
  experiment is deleted, then the new one is enabled. If anything fails half-way, the old
  schedule (or a disabled new one) is left and rerunning this command converges.

  Args:
    client: A ``kfp.Client``.
    experiment: Experiment name; created if missing.
    job_name: Recurring run display name; the identity used for replacing.
    cron: The schedule (its KFP six-field form is submitted).
    package_path: A package `kfp.Client.create_recurring_run` accepts.
    namespace: Kubernetes namespace for multi-user KFP.
    pipeline_root: Pipeline root for the runs.
    params: Pipeline parameter values.
    log: Where progress lines go.

  Returns:
    The created ``V2beta1RecurringRun``.
  """
  validate_job_name(job_name)
  exp = client.create_experiment(name=experiment, namespace=namespace)
  old = [
    run
    for run in _list_all_recurring_runs(client, exp.experiment_id)
    if run.display_name == job_name
  ]
  created = client.create_recurring_run(
    experiment_id=exp.experiment_id,
    job_name=job_name,
    description=f"Nightly pipeline run ({cron.source}); managed by pipeline/schedule.py.",
    cron_expression=cron.kfp,
    max_concurrency=1,
    no_catchup=True,
    pipeline_package_path=package_path,
    params=dict(params or {}),
    pipeline_root=pipeline_root,
    enabled=False,
  )
  for run in old:
    client.delete_recurring_run(run.recurring_run_id)
    log(f"Deleted the previous recurring run {run.recurring_run_id} named {job_name!r}.")
  client.enable_recurring_run(created.recurring_run_id)
  return created


def _list_all_recurring_runs(client: Any, experiment_id: str) -> list[Any]:
  # Filtering by name client-side: server-side filter keys for recurring runs differ between
  # KFP versions, and an experiment holds few of them.
  runs, token = [], ""
  while True:
    page = client.list_recurring_runs(page_token=token, page_size=100, experiment_id=experiment_id)
    runs.extend(page.recurring_runs or [])
    token = page.next_page_token or ""
    if not token:
      return runs
