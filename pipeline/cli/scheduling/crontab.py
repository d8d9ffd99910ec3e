"""The local target: one marked block per job in the user's crontab (or a crontab file)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Sequence

from pipeline.cli.scheduling.cron import (
  ScheduleError,
  one_line,
  reject_control_chars,
  validate_job_name,
)

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
    line: The cron line itself (schedule and command); "" where its block holds none (the
      line commented out by hand: the job is disabled).
    legacy: Whether it is an old one-line entry rather than a block.
    others: Active lines in its block that the kit did not write (added by hand).
  """

  job: str
  first: int
  last: int
  line: str
  legacy: bool = False
  others: tuple[str, ...] = ()

  @property
  def schedule(self) -> str:
    """The five-field schedule of the entry."""
    return " ".join(self.line.split()[:5])


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
  time_limit: str = "6h",
) -> str:
  """Builds the command part of the crontab line (without the schedule).

  The job runs ``pipeline/schedule.py local night`` from the repo with the repo's interpreter:
  it takes ``D/.cron.lock``, runs ``pipeline/run_local.py --output-dir D`` under the time
  limit, records a night it skips or stops, and exits with the night's own status (see
  `pipeline.cli.night_job`). Its output goes to ``D/logs/nightly.log``. Every value is
  shell-quoted, and the whole is escaped for cron's ``%`` handling; values with control
  characters are refused because a line feed would end the crontab line and start another job.

  Args:
    repo_root: Absolute repository root (cron starts in $HOME; we cd here).
    python: Interpreter, normally ``<repo>/.venv/bin/python``.
    output_dir: Absolute pipeline output folder (lock and logs live here).
    job_name: The job's name (in the log's header of each night).
    run_local_args: Extra arguments for run_local.py.
    time_limit: The night's time limit ('6h', '90m').

  Returns:
    The command, one line, escaped as crontab requires.

  Raises:
    ScheduleError: If a value holds a control character or the job name is invalid.
  """
  for value, what in ((repo_root, "the repository path"), (python, "--python")):
    reject_control_chars(value, what)
  reject_control_chars(output_dir, "--output-dir")
  reject_control_chars(time_limit, "--time-limit")
  for position, arg in enumerate(run_local_args, start=1):
    reject_control_chars(arg, f"run_local.py argument {position} (after --)")
  validate_job_name(job_name)
  q = _cron_word
  logs = os.path.join(output_dir, "logs")
  night = " ".join(
    [
      "TF_USE_LEGACY_KERAS=1",
      q(python),
      "pipeline/schedule.py",
      "local",
      "night",
      "--output-dir",
      q(output_dir),
      "--job-name",
      q(job_name),
      "--time-limit",
      q(time_limit),
      "--",
      *(q(a) for a in run_local_args),
    ]
  )
  log = os.path.join(logs, "nightly.log")
  command = f"cd {q(repo_root)} && mkdir -p {q(logs)} && {night} >> {q(log)} 2>&1"
  return cron_escape(command)


def cron_command_of(line: str) -> str:
  r"""The shell command of a crontab line, as cron hands it to /bin/sh: without the five
  schedule fields, cut at the first unescaped ``%`` (cron feeds the rest to stdin), ``\%``
  turned into ``%``."""
  command = line.split(None, 5)[5] if len(line.split(None, 5)) == 6 else ""
  out, i = [], 0
  while i < len(command):
    if command.startswith("\\%", i):
      out.append("%")
      i += 2
      continue
    if command[i] == "%":
      break
    out.append(command[i])
    i += 1
  return "".join(out)


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
          ours = [line for line in body if _KIT_SCRIPTS.search(line)][:1]
          others = tuple(line for line in body if line not in ours)
          entries.append(CrontabEntry(job, i, end, ours[0] if ours else "", others=others))
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


# The scripts a kit's cron line runs (`local night`; run_local.py in older entries).
_KIT_SCRIPTS = re.compile(r"pipeline/(?:schedule|run_local)\.py")


def _refuse_lines_of_others(entries: list[CrontabEntry]) -> None:
  """Replacing or removing a block must not drop lines a user put inside it."""
  for entry in entries:
    if entry.others:
      raise ScheduleError(
        f"the crontab's block of {entry.job!r} holds a line the kit did not write "
        f"({entry.others[0]!r}); move it out of the block (crontab -e), then run this again."
      )


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
  _refuse_lines_of_others(entries)
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
  _refuse_lines_of_others(entries)
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
    ScheduleError: If ``crontab`` is not installed or fails, or `crontab_file` cannot be one
      (a folder, or in a folder that does not exist).
  """
  if crontab_file:
    _check_crontab_file(crontab_file)
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
    raise ScheduleError(f"'crontab -l' failed: {one_line(stderr) or result.returncode}.")
  return _decode(result.stdout)


def _check_crontab_file(crontab_file: str) -> None:
  """Refuses a --crontab-file that names a folder, or a file in a folder that is not there."""
  if os.path.isdir(crontab_file):
    example = os.path.join(crontab_file, "crontab")
    raise ScheduleError(
      f"--crontab-file {crontab_file} is a folder; pass the crontab file to edit, e.g. "
      f"--crontab-file {example} (it is created if missing)."
    )
  folder = os.path.dirname(os.path.abspath(crontab_file))
  if not os.path.isdir(folder):
    raise ScheduleError(
      f"--crontab-file {crontab_file}: its folder {folder} does not exist; create it or pass "
      "a file in an existing folder."
    )


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
    raise ScheduleError(f"'crontab -' rejected the table: {one_line(_decode(result.stderr))}.")


def _decode(data: bytes) -> str:
  return data.decode("utf-8", "surrogateescape")


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
