"""Cron for nightly runs: the standard five-field form, KFP's six-field form, and safe values.

Cron dialects differ in a way that silently breaks schedules: KFP's backend parses cron with
robfig/cron v1, whose fields are ``second minute hour day-of-month month [day-of-week]``.
A standard five-field ``0 2 * * *`` handed to KFP unchanged is read as "second 0 of minute 2
of every hour", i.e. hourly. `parse_cron` therefore gives both forms, the six-field one
seconds first (``0 0 2 * * *``). Every value that reaches a crontab line or a KFP request is
checked for control characters here too.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from croniter import croniter

from core.errors import UserInputError

# The system zone file the cron daemon reads (cron_zone).
LOCALTIME = "/etc/localtime"
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
      raise ScheduleError(
        f"Invalid cron field {field!r} in {text!r}; use numbers, '*', ranges (1-5), lists "
        "(1,3) and steps (*/15), e.g. '0 2 * * *'."
      )
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
    raise ScheduleError(
      f"Invalid cron expression {text!r} ({e}); pass minute hour day month weekday in range, "
      "e.g. '0 2 * * *' for 02:00 daily."
    ) from e
  _check_fires_within_a_year(text, six)
  five = six.split(" ", 1)[1] if six.split(" ", 1)[0] == "0" else None
  return CronSpec(source, five, six)


def _check_fires_within_a_year(text: str, six: str) -> None:
  """Refuses a schedule with no run in the next 366 days (in UTC and in local time).

  Every field can be in range while their combination names a date that never comes
  ("0 2 30 2 *", February 30th) or comes only in a later year (February 29th): such an entry
  would replace a working one and never run.
  """
  now = _now_utc()
  for tz in (datetime.timezone.utc, cron_zone()):
    start = now.astimezone(tz)
    try:
      first = croniter(six, start, second_at_beginning=True).get_next(datetime.datetime)
    except (ValueError, KeyError):  # CroniterBadDateError: no date at all matches.
      first = None
    if first is None or first - start > datetime.timedelta(days=366):
      when = f"its next run would be {first:%Y-%m-%d}" if first else "no date matches it"
      raise ScheduleError(
        f"{text!r} does not run in the next year ({when}); check the day and month fields, "
        "e.g. '0 2 * * *' for 02:00 daily."
      )


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
      `cron_zone()` for the system cron daemon, None for this process's local zone.

  Returns:
    Timezone-aware datetimes in `tz`, ascending.
  """
  start = (start or _now_utc()).astimezone(tz)
  it = croniter(spec.kfp, start, second_at_beginning=True)
  return [it.get_next(datetime.datetime) for _ in range(count)]


def previous_run(
  spec: CronSpec, before: datetime.datetime, local_cron: bool = False
) -> datetime.datetime | None:
  """The schedule's last run time at or before `before`, in UTC (None: none in 400 days).

  Args:
    spec: The schedule.
    before: A timezone-aware time.
    local_cron: Evaluate the schedule in local time (system cron) instead of UTC (KFP).
  """
  start = before.astimezone(cron_zone() if local_cron else datetime.timezone.utc)
  try:
    when = croniter(spec.kfp, start, second_at_beginning=True).get_prev(datetime.datetime)
  except (ValueError, KeyError):
    return None
  if start - when > datetime.timedelta(days=400):
    return None
  return when.astimezone(datetime.timezone.utc)


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
  for when in next_runs(spec, count, tz=cron_zone() if local_cron else datetime.timezone.utc):
    utc = when.astimezone(datetime.timezone.utc)
    local = when if local_cron else when.astimezone()
    line = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    if local.utcoffset() != datetime.timedelta(0):
      line += local.strftime(" (%Y-%m-%d %H:%M:%S %Z local)")
    lines.append(line)
  return lines


def cron_zone() -> datetime.tzinfo | None:
  """The zone the system's cron daemon reads its entries in: /etc/localtime's. cron does not see
  the TZ of the shell that installs an entry (TZ=Asia/Tokyo there put the next run 9 hours off);
  None (this process's local zone) where the file is missing or unreadable."""
  import zoneinfo

  try:
    with open(LOCALTIME, "rb") as f:
      return zoneinfo.ZoneInfo.from_file(f, key="localtime")
  except (OSError, ValueError):
    return None


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


def one_line(text: str) -> str:
  return " ".join(text.split())
