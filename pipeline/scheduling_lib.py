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
import http.client
import json
import os
import re
import shlex
import socket
import ssl
import subprocess
import tempfile
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from croniter import croniter

from components.errors import UserInputError

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


class ScheduleError(UserInputError):
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


# ----------------------------------------------------------------------------- text safety

# Names for the characters people actually paste by accident; others are shown as U+XXXX only.
_CHAR_NAMES = {
  "\x00": "NUL",
  "\t": "tab",
  "\n": "line feed",
  "\x0b": "vertical tab",
  "\x0c": "form feed",
  "\r": "carriage return",
  "\x1b": "escape",
  "\x7f": "delete",
  "\x85": "next line",
  "\u2028": "line separator",
  "\u2029": "paragraph separator",
}


def control_char_problem(value: str) -> str | None:
  """Describes the first character of `value` that must not reach a crontab or a KFP request.

  Refused: control characters (Unicode category Cc: NUL, tab, line feed, carriage return,
  escape, delete, C1 controls), the line and paragraph separators U+2028/U+2029 (Python and
  many tools split lines there too), and lone surrogates, which is how Python hands over
  command-line bytes that are not valid UTF-8 (they could not be written to the crontab).

  Args:
    value: The text to check.

  Returns:
    None when the value is clean, else the problem, e.g.
    ``"a control character (U+000A line feed at character 4)"``.
  """
  for position, char in enumerate(value, start=1):
    category = unicodedata.category(char)
    if category == "Cs":
      byte = f"0x{ord(char) - 0xDC00:02X}" if 0xDC80 <= ord(char) <= 0xDCFF else "a surrogate"
      return f"a byte that is not valid UTF-8 ({byte} at character {position})"
    if category in ("Cc", "Zl", "Zp"):
      label = f"U+{ord(char):04X} {_CHAR_NAMES.get(char, '')}".rstrip()
      return f"a control character ({label} at character {position})"
  return None


def reject_control_chars(value: Any, what: str) -> None:
  """Refuses a value (or any string inside a list or mapping) holding a control character.

  A line feed in anything that is written into a crontab line starts a new crontab line, i.e.
  a new job; in KFP requests such values end up in names, labels and logs. Quoting does not
  help with either, so such values are refused rather than escaped.

  Args:
    value: A string, or a list, tuple or mapping of them (checked recursively, keys too);
      other types are ignored.
    what: How to name the value in the message, e.g. ``--output-dir``.

  Raises:
    ScheduleError: ``<what> contains a control character (<which>); remove it.``
  """
  if isinstance(value, str):
    problem = control_char_problem(value)
    if problem:
      raise ScheduleError(f"{what} contains {problem}; remove it.")
  elif isinstance(value, Mapping):
    for key, item in value.items():
      reject_control_chars(key, f"a name in {what}")
      reject_control_chars(item, f"{what} {key!r}" if isinstance(key, str) else what)
  elif isinstance(value, list | tuple):
    for item in value:
      reject_control_chars(item, what)


# ----------------------------------------------------------------------------- crontab

# An installed job is one block of three lines; cron ignores the two comment lines.
BLOCK_BEGIN = "# BEGIN tfx-pipeline-kit "
BLOCK_END = "# END tfx-pipeline-kit "
# Earlier versions wrote one line ending in this marker instead of a block; install and remove
# still recognise such a line for the same job, so that upgrading leaves no duplicate job.
LEGACY_MARKER = "# tfx-pipeline-kit job="


@dataclasses.dataclass(frozen=True)
class CrontabEntry:
  """One job this tool installed, as found in a crontab.

  Attributes:
    job: The job name.
    first: Index of its first line in ``text.split("\\n")``.
    last: Index of its last line (inclusive).
    line: The cron line itself (schedule and command).
    legacy: Whether it is an old one-line entry rather than a block.
  """

  job: str
  first: int
  last: int
  line: str
  legacy: bool = False

  @property
  def schedule(self) -> str:
    """The five-field schedule of the entry."""
    return " ".join(self.line.split()[:5])


def validate_job_name(name: str) -> str:
  """Checks a job name used in crontab markers and KFP display names.

  Args:
    name: The job name.

  Returns:
    The name.

  Raises:
    ScheduleError: If it is empty or has characters other than letters, digits, ``._-``.
  """
  if isinstance(name, str):
    reject_control_chars(name, "the job name")
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
  digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:8]
  return f"nightly-{base}-{digest}"


def _cron_word(value: str) -> str:
  # shlex.quote makes one shell word. Cron then reads the line once more: it drops a backslash
  # before a %, and a % it does not see escaped ends the command. A backslash right before a
  # % can only occur inside a single-quoted word, where closing and reopening the quotes
  # ('a\''%' is a\% to the shell) keeps the two apart; `crontab_command` escapes every %.
  return shlex.quote(value).replace("\\%", "\\''%")


def cron_escape(command: str) -> str:
  """Escapes a shell command for the command field of a crontab line.

  Cron turns every ``%`` that is not preceded by a backslash into a line feed and feeds what
  follows to the command's stdin; ``\\%`` becomes ``%``. A backslash immediately before a
  ``%`` cannot be expressed at all, so words are quoted with `_cron_word`, which never
  produces one.

  Args:
    command: The shell command, its words quoted with `_cron_word`.

  Returns:
    The text for the crontab line.
  """
  return command.replace("%", "\\%")


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
  to ``D/logs/nightly.log``. Every value is shell-quoted, and the whole is escaped for cron's
  ``%`` handling; values with control characters are refused because a line feed would end
  the crontab line and start another job.

  Args:
    repo_root: Absolute repository root (cron starts in $HOME; we cd here).
    python: Interpreter, normally ``<repo>/.venv/bin/python``.
    output_dir: Absolute pipeline output folder (lock and logs live here).
    job_name: The job's name (used in the "skipped" log line).
    run_local_args: Extra arguments for run_local.py.

  Returns:
    The command, one line, escaped as crontab requires.

  Raises:
    ScheduleError: If a value holds a control character or the job name is invalid.
  """
  for value, what in ((repo_root, "the repository path"), (python, "--python")):
    reject_control_chars(value, what)
  reject_control_chars(output_dir, "--output-dir")
  for position, arg in enumerate(run_local_args, start=1):
    reject_control_chars(arg, f"run_local.py argument {position} (after --)")
  validate_job_name(job_name)
  q = _cron_word
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
    f"{{ [ $? -eq 75 ] && {skipped} >> {q(log)}; }}; }}"
  )
  return cron_escape(command)


def block_lines(job_name: str, schedule_five_field: str, command: str) -> list[str]:
  """Returns the three lines that make up a job's block.

  Args:
    job_name: The job's name.
    schedule_five_field: Five-field schedule for the system cron daemon.
    command: From `crontab_command`.

  Returns:
    ``[# BEGIN ..., <schedule> <command>, # END ...]``.

  Raises:
    ScheduleError: If any part would not stay on its one line.
  """
  validate_job_name(job_name)
  reject_control_chars(schedule_five_field, "the schedule")
  reject_control_chars(command, "the cron command")
  if len(schedule_five_field.split()) != 5:
    raise ScheduleError(f"Cron schedule {schedule_five_field!r} does not have five fields.")
  return [f"{BLOCK_BEGIN}{job_name}", f"{schedule_five_field} {command}", f"{BLOCK_END}{job_name}"]


def _is_legacy_line(line: str) -> bool:
  marker_at = line.rfind(LEGACY_MARKER)
  return marker_at >= 0 and not line.lstrip().startswith("#")


def find_entries(crontab_text: str, job_name: str | None = None) -> list[CrontabEntry]:
  """Finds the jobs this tool installed.

  A block is a ``# BEGIN tfx-pipeline-kit <job>`` line, then lines up to the next
  ``# END tfx-pipeline-kit <job>`` line for the same job (trailing whitespace on the marker
  lines is tolerated). A BEGIN line that no such END line follows before the next marker line is
  treated as an ordinary line, except for `job_name` itself, where it is an error: guessing
  where such a block ends could delete the user's own lines.

  Args:
    crontab_text: The crontab.
    job_name: Only report this job (and check its blocks); None for all jobs.

  Returns:
    The entries, in crontab order.

  Raises:
    ScheduleError: If a block of `job_name` has no END line.
  """
  lines = crontab_text.split("\n")
  entries: list[CrontabEntry] = []
  i = 0
  while i < len(lines):
    text = lines[i].rstrip()
    if text.startswith(BLOCK_BEGIN):
      job = text[len(BLOCK_BEGIN) :]
      end = next(
        (j for j in range(i + 1, len(lines)) if lines[j].startswith((BLOCK_BEGIN, BLOCK_END))),
        None,
      )
      if end is not None and lines[end].rstrip() == f"{BLOCK_END}{job}":
        if job_name in (None, job):
          body = [line for line in lines[i + 1 : end] if line.strip() and not _is_comment(line)]
          entries.append(CrontabEntry(job, i, end, body[0] if body else ""))
        i = end + 1
        continue
      if job == job_name:
        raise ScheduleError(
          f"Line {i + 1} of the crontab, {text!r}, has no matching {BLOCK_END}{job} line; "
          "fix or delete the block by hand (crontab -e), then run this again."
        )
    elif _is_legacy_line(lines[i]):
      job = lines[i][lines[i].rfind(LEGACY_MARKER) + len(LEGACY_MARKER) :].strip()
      if job_name in (None, job):
        entries.append(CrontabEntry(job, i, i, lines[i], legacy=True))
    i += 1
  return entries


def _is_comment(line: str) -> bool:
  return line.lstrip().startswith("#")


def install_entry(crontab_text: str, schedule_five_field: str, command: str, job_name: str) -> str:
  """Returns the crontab with exactly one block for `job_name`.

  An existing block (or old one-line entry) of the job is replaced in place; further ones are
  dropped. Every other line is kept byte for byte, in order. Without an existing entry the
  block is appended, after a line feed if the crontab lacked a final one.

  Args:
    crontab_text: The current crontab.
    schedule_five_field: Five-field schedule for the system cron daemon.
    command: From `crontab_command`.
    job_name: The job's name.

  Returns:
    The new crontab text.

  Raises:
    ScheduleError: If a value would break the line, or the job's block is malformed.
  """
  block = block_lines(job_name, schedule_five_field, command)
  entries = find_entries(crontab_text, job_name)
  lines = crontab_text.split("\n")
  if not entries:
    # split("\n") leaves "" last when the text ends with a line feed (or is empty).
    if lines[-1] == "":
      return "\n".join([*lines[:-1], *block, ""])
    return "\n".join([*lines, *block, ""])
  out = lines[: entries[0].first] + block
  for entry, following in zip(entries, [*entries[1:], None], strict=True):
    out += lines[entry.last + 1 : following.first if following else len(lines)]
  return "\n".join(out)


def remove_entry(crontab_text: str, job_name: str) -> tuple[str, int]:
  """Removes this job's block (and any old one-line entry of it), nothing else.

  Args:
    crontab_text: The current crontab.
    job_name: The job's name.

  Returns:
    (new crontab text, number of entries removed); the text is unchanged when none was found.

  Raises:
    ScheduleError: If the job's block is malformed.
  """
  validate_job_name(job_name)
  entries = find_entries(crontab_text, job_name)
  if not entries:
    return crontab_text, 0
  lines = crontab_text.split("\n")
  drop = {i for entry in entries for i in range(entry.first, entry.last + 1)}
  kept = [line for i, line in enumerate(lines) if i not in drop]
  return "\n".join(kept), len(entries)


def list_entries(crontab_text: str) -> list[CrontabEntry]:
  """Lists the jobs this tool installed.

  Args:
    crontab_text: The current crontab.

  Returns:
    One `CrontabEntry` per block or old one-line entry, in crontab order.
  """
  return find_entries(crontab_text)


def read_crontab(crontab_file: str | None) -> str:
  """Reads the user's crontab (``crontab -l``) or a plain crontab file.

  Bytes that are not UTF-8 and carriage returns survive a read-modify-write unchanged.

  Args:
    crontab_file: A file to use instead of the system crontab; None for ``crontab -l``.

  Returns:
    The crontab text ("" when there is none).

  Raises:
    ScheduleError: If ``crontab`` is not installed or fails.
  """
  if crontab_file:
    try:
      with open(crontab_file, "rb") as f:
        return _decode(f.read())
    except FileNotFoundError:
      return ""
  result = _run_crontab(["-l"])
  if result.returncode != 0:
    stderr = _decode(result.stderr)
    if "no crontab" in stderr.lower():
      return ""
    raise ScheduleError(f"'crontab -l' failed: {_one_line(stderr) or result.returncode}.")
  return _decode(result.stdout)


def write_crontab(crontab_file: str | None, text: str) -> None:
  """Writes the user's crontab (``crontab -``) or a plain crontab file (atomically).

  Args:
    crontab_file: A file to use instead of the system crontab; None for ``crontab -``.
    text: The full crontab.

  Raises:
    ScheduleError: If ``crontab`` is not installed or rejects the table.
  """
  data = text.encode("utf-8", "surrogateescape")
  if crontab_file:
    directory = os.path.dirname(os.path.abspath(crontab_file))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".crontab-")
    try:
      with os.fdopen(fd, "wb") as f:
        f.write(data)
      if os.path.exists(crontab_file):
        os.chmod(tmp, os.stat(crontab_file).st_mode & 0o7777)
      os.replace(tmp, crontab_file)
    except BaseException:
      if os.path.exists(tmp):
        os.unlink(tmp)
      raise
    return
  result = _run_crontab(["-"], stdin=data)
  if result.returncode != 0:
    raise ScheduleError(f"'crontab -' rejected the table: {_one_line(_decode(result.stderr))}.")


def _decode(data: bytes) -> str:
  return data.decode("utf-8", "surrogateescape")


def _one_line(text: str) -> str:
  return " ".join(text.split())


def _run_crontab(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
  try:
    return subprocess.run(
      ["crontab", *args], input=stdin, capture_output=True, check=False, timeout=60
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
  ``.zip`` or ``.tar.gz`` packages holding a bare PipelineSpec. run_kubeflow.py writes that
  package beside the JSON (``<name>.kfp.yaml``, with its platform spec); it is used when it is
  there, else the PipelineSpec is written to ``<out_dir>/<name>.kfp.yaml`` (JSON is valid
  YAML). Either way the run-time settings come from the JSON.

  Args:
    compiled_path: A TFX-compiled ``.json`` or a KFP ``.yaml``/``.zip``/``.tar.gz`` package.
    out_dir: Where to write the converted package.

  Returns:
    (package path, runtime settings with optional ``pipeline_root`` and ``params``).

  Raises:
    ScheduleError: If the file is missing or not a pipeline, or its pipeline root or parameter
      values hold control characters (checked before anything is written).
  """
  reject_control_chars(compiled_path, "the pipeline package path")
  reject_control_chars(out_dir, "--build-dir")
  if not os.path.isfile(compiled_path):
    raise ScheduleError(f"Pipeline package {compiled_path!r} does not exist; compile it first.")
  if compiled_path.endswith((".yaml", ".yml")):
    return compiled_path, _yaml_package_settings(compiled_path)
  if compiled_path.endswith((".zip", ".tar.gz", ".tgz")):
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
  reject_control_chars(settings.get("pipeline_root"), f"the pipeline root in {compiled_path}")
  for name, value in (settings.get("params") or {}).items():
    reject_control_chars(name, f"a parameter name in {compiled_path}")
    reject_control_chars(value, f"parameter {name!r} in {compiled_path}")
  stem = compiled_path[: -len(".json")]
  if os.path.isfile(f"{stem}.kfp.yaml"):
    # run_kubeflow.py's package written beside the JSON: it also holds the platform spec
    # (volumes, secrets) that the bare PipelineSpec below would drop.
    return f"{stem}.kfp.yaml", settings
  os.makedirs(out_dir, exist_ok=True)
  out = os.path.join(out_dir, f"{os.path.basename(stem)}.kfp.yaml")
  with open(out, "w", encoding="utf-8") as f:
    json.dump(spec, f, indent=1, sort_keys=True)
    f.write("\n")
  return out, settings


def _yaml_package_settings(path: str) -> dict[str, Any]:
  """The pipeline root a KFP package names (`defaultPipelineRoot`), as run-time settings."""
  import yaml  # PyYAML, a kfp dependency.

  try:
    with open(path, encoding="utf-8") as f:
      spec = next(iter(yaml.safe_load_all(f)), None)
  except yaml.YAMLError as e:
    raise ScheduleError(f"{path} is not valid YAML ({e}).") from e
  root = spec.get("defaultPipelineRoot") if isinstance(spec, dict) else None
  if not root:
    return {}
  reject_control_chars(root, f"the pipeline root in {path}")
  return {"pipeline_root": root}


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

  Raises:
    ScheduleError: If the host holds a control character or names a scheme other than http(s).
  """
  host = flag_host or environ.get("KFP_HOST") or None
  what = "--host" if flag_host else "$KFP_HOST"
  reject_control_chars(host, what)
  scheme = urllib.parse.urlsplit(host).scheme if host and "://" in host else ""
  if scheme and scheme.lower() not in ("http", "https"):
    raise ScheduleError(
      f"{what} {host} is a {scheme}:// address, and the KFP API is served over HTTP; pass "
      "http://HOST:PORT or https://HOST."
    )
  return host


def host_source(flag_host: str | None, environ: Mapping[str, str]) -> tuple[str | None, str]:
  """Says which KFP endpoint the client will talk to and where that came from.

  Args:
    flag_host: The --host flag.
    environ: The environment.

  Returns:
    (URL or None, its source for messages: ``--host``, ``$KFP_HOST`` or
    ``$KF_PIPELINES_ENDPOINT``). None when kfp finds the endpoint itself (in-cluster DNS or
    the kube config), which cannot be checked ahead.

  Raises:
    ScheduleError: If the value holds a control character.
  """
  for value, what in (
    (flag_host, "--host"),
    (environ.get("KFP_HOST"), "$KFP_HOST"),
    (environ.get("KF_PIPELINES_ENDPOINT"), "$KF_PIPELINES_ENDPOINT"),
  ):
    if value:
      reject_control_chars(value, what)
      return value, what
  return None, "the kube config"


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
    reject_control_chars(token, f"the token in --token-file {token_file}")
    return Credentials(existing_token=token, source=f"token file {token_file}")
  if environ.get("KFP_TOKEN"):
    reject_control_chars(environ["KFP_TOKEN"].strip(), "$KFP_TOKEN")
    return Credentials(existing_token=environ["KFP_TOKEN"].strip(), source="$KFP_TOKEN")
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


# Where kfp 2.5's client checks health (v2beta1) and where KFP 1.x answers (v1beta1).
HEALTHZ_V2 = "/apis/v2beta1/healthz"
HEALTHZ_V1 = "/apis/v1beta1/healthz"
_BODY_LIMIT = 65536


@dataclasses.dataclass(frozen=True)
class HttpAnswer:
  """What a server answered to one GET.

  Attributes:
    status: The HTTP status code.
    content_type: The Content-Type header without parameters, or "" when there was none.
    body: Up to 64 KiB of the body.
    url: The URL that answered (differs from the one asked for after a redirect).
  """

  status: int
  content_type: str
  body: bytes
  url: str


def kfp_host_url(host: str) -> str:
  """Normalises a KFP host the way ``kfp.Client`` does: https:// if no scheme, no final slash.

  Args:
    host: The host as given.

  Returns:
    The base URL the client will use.
  """
  if not host.startswith("http"):
    host = "https://" + host
  return host.rstrip("/")


def check_kfp_health(
  host: str,
  *,
  what: str = "--host",
  token: str | None = None,
  timeout_s: float = 5.0,
  http_get: Callable[[str, Mapping[str, str], float], HttpAnswer] | None = None,
) -> None:
  """Checks quickly that `host` is a Kubeflow Pipelines 2.x API server.

  ``kfp.Client`` retries its health check five times, five seconds apart, logging a traceback
  each time, and then reports only a timeout. This asks ``GET <host>/apis/v2beta1/healthz``
  once, with a short timeout, and turns whatever answered into one sentence. Answers that
  may come from a real KFP behind authentication (401, 403) pass, so that the client, which
  knows more ways to authenticate, reports them.

  Args:
    host: The KFP host URL.
    what: Where the host came from, for the message (``--host``, ``$KFP_HOST``...).
    token: Bearer token to send (never sent on to a redirect target).
    timeout_s: Seconds to wait for connecting and for each read.
    http_get: Replaces the HTTP call (tests); takes (url, headers, timeout_s).

  Raises:
    ScheduleError: If nothing answers, or what answers is not KFP 2.x.
  """
  base = kfp_host_url(host)
  shown = redact_host(base)
  parts = urllib.parse.urlsplit(base)
  if "@" in parts.netloc or re.search(r"googleusercontent\.com$", parts.hostname or ""):
    # Credentials in the URL, or Google's inverse proxy for which the client fetches a Google
    # token itself: this check could not authenticate like the client will.
    return
  get = http_get or _http_get
  headers = {"Authorization": f"Bearer {token}"} if token else {}
  hint = f"is {what} the Kubeflow Pipelines API endpoint?"
  answer = _ask(get, base + HEALTHZ_V2, headers, timeout_s, shown, what)
  if answer.status in (401, 403) or (answer.status == 200 and _is_json_object(answer.body)):
    return
  if answer.status == 404:
    v1 = _ask(get, base + HEALTHZ_V1, headers, timeout_s, shown, what)
    if v1.status == 200 and _is_json_object(v1.body):
      raise ScheduleError(
        f"{shown} answers KFP's v1 health check ({HEALTHZ_V1}) but not v2 ({HEALTHZ_V2}): it "
        "runs Kubeflow Pipelines 1.x, and this tool's kfp 2.5 client needs KFP 2.0 or later."
      )
  kind = answer.content_type or "no Content-Type"
  if answer.status == 200:
    kind += ", not JSON"
  redirected = ""
  if answer.url != base + HEALTHZ_V2:
    target = urllib.parse.urlsplit(answer.url)
    redirected = f" after a redirect to {target.scheme}://{target.netloc}{target.path}"
  if answer.status >= 500:
    hint = f"is the KFP API server behind {what} up?"
  raise ScheduleError(
    f"{shown} answered HTTP {answer.status} ({kind}) to the KFP health check "
    f"{HEALTHZ_V2}{redirected}; {hint}"
  )


def _is_json_object(body: bytes) -> bool:
  try:
    return isinstance(json.loads(body), dict)
  except ValueError:  # Not UTF-8 or not JSON.
    return False


def _ask(
  get: Callable[[str, Mapping[str, str], float], HttpAnswer],
  url: str,
  headers: Mapping[str, str],
  timeout_s: float,
  shown: str,
  what: str,
) -> HttpAnswer:
  try:
    return get(url, headers, timeout_s)
  except urllib.error.URLError as e:
    reason = e.reason
  except (OSError, http.client.HTTPException, ValueError) as e:
    reason = e
  if isinstance(reason, ConnectionRefusedError):
    raise ScheduleError(
      f"cannot connect to {shown}: connection refused; check {what} and that the KFP API "
      "server (or your kubectl port-forward) is running."
    )
  if isinstance(reason, socket.gaierror):
    raise ScheduleError(f"cannot resolve the host name of {shown}; check {what}.")
  if isinstance(reason, TimeoutError):
    raise ScheduleError(
      f"{shown} did not answer the KFP health check within {timeout_s:g} s; check {what}, "
      "firewalls and port-forwards."
    )
  if isinstance(reason, ssl.SSLError | ssl.CertificateError):
    raise ScheduleError(
      f"TLS with {shown} failed ({_one_line(str(reason))}); check {what} (http:// or https://) "
      "and the server's certificate."
    )
  if isinstance(reason, http.client.HTTPException | ConnectionResetError):
    raise ScheduleError(
      f"{shown} did not answer the KFP health check with HTTP ({type(reason).__name__}); "
      f"is {what} the Kubeflow Pipelines API endpoint?"
    )
  if isinstance(reason, ValueError):
    raise ScheduleError(f"{what} {shown!r} is not a valid URL ({_one_line(str(reason))}).")
  detail = getattr(reason, "strerror", None) or str(reason)
  raise ScheduleError(f"cannot connect to {shown}: {_one_line(str(detail))}; check {what}.")


class _NoAuthOnRedirect(urllib.request.HTTPRedirectHandler):
  """Follows redirects like the KFP client does, never carrying the token along."""

  def redirect_request(self, req, fp, code, msg, headers, newurl):
    new = super().redirect_request(req, fp, code, msg, headers, newurl)
    if new is not None:
      new.remove_header("Authorization")
    return new


def _http_get(url: str, headers: Mapping[str, str], timeout_s: float) -> HttpAnswer:
  context = None
  try:
    import certifi  # What kfp_server_api's urllib3 pool verifies against.

    context = ssl.create_default_context(cafile=certifi.where())
  except ImportError:
    context = ssl.create_default_context()
  opener = urllib.request.build_opener(
    urllib.request.ProxyHandler({}),  # kfp's client ignores $http_proxy too.
    urllib.request.HTTPSHandler(context=context),
    _NoAuthOnRedirect(),
  )
  request = urllib.request.Request(url, headers={"Accept": "application/json", **headers})
  try:
    response = opener.open(request, timeout=timeout_s)
  except urllib.error.HTTPError as e:
    response = e
  with response:
    body = response.read(_BODY_LIMIT)
    content_type = (response.headers.get("Content-Type") or "").split(";")[0].strip()
    return HttpAnswer(response.status, content_type, body, response.geturl())


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

  Raises:
    ScheduleError: If any value holds a control character (checked before any request).
  """
  validate_job_name(job_name)
  for value, what in (
    (experiment, "--experiment"),
    (cron.source, "--cron"),
    (cron.kfp, "--cron"),
    (package_path, "the pipeline package path"),
    (namespace, "--namespace"),
    (pipeline_root, "the pipeline root"),
    (params, "pipeline parameter"),
  ):
    reject_control_chars(value, what)
  description = f"Nightly pipeline run ({cron.source}); managed by pipeline/schedule.py."
  exp = client.create_experiment(name=experiment, namespace=namespace)
  old = [
    run
    for run in _list_all_recurring_runs(client, exp.experiment_id)
    if run.display_name == job_name
  ]
  created = client.create_recurring_run(
    experiment_id=exp.experiment_id,
    job_name=job_name,
    description=description,
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
