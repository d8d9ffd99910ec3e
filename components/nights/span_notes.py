"""What a night is told of its spans before it reads them: a newer span folder without files,
spans with files that no night read, data that stopped coming.

run_local.py asks before its run, and Kubeflow's span resolver task (`CsvExampleGen_span`) each
night, so both runners record the same notes (`nights_lib.NOTES_FIELD`), which the night's
summary, record and notice carry. Local folders are read with `os`, object stores (gs://, s3://)
with TFX's fileio (`storage.files`). A note is one line; what cannot be listed makes none.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import re
from collections.abc import Sequence
from typing import Any

from components import storage
from core import spans

_LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class _Data:
  """One listing of the data, shared by the notes: the pattern with its placeholders, its file
  functions, every file it matches in any span, and the newest span among them."""

  root: str
  full: str
  fs: Any
  found: list[str]
  newest: spans.Resolved | None


def _listed(data_root: str, pattern: str) -> _Data:
  full = os.path.join(data_root, pattern)
  fs = storage.files(full)
  found = _files(fs, spans.matching(full)[0] if spans.is_unresolved(full) else full)
  newest = spans.newest(full, found) if found and spans.is_unresolved(full) else None
  return _Data(data_root, full, fs, found, newest)


def _files(fs: Any, pattern: str) -> list[str]:
  """The files a glob matches (an object store lists objects, which are files)."""
  if fs is storage.LocalFiles:  # A local glob matches folders too.
    return sorted(p for p in fs.glob(pattern) if os.path.isfile(p))
  return sorted(p for p in fs.glob(pattern) if not p.endswith("/"))


def night_notes(
  data_root: str,
  pattern: str,
  serving_dir: str,
  model_name: str,
  rolling_spans: int,
  stale_after_s: float = 0.0,
  now: datetime.datetime | None = None,
) -> list[str]:
  """Every note of tonight's data, from one listing of it and one read of the nights' records.

  Args:
    data_root, pattern: --data-root and --input-pattern.
    serving_dir, model_name: where the nights' records are.
    rolling_spans: --rolling-spans: the newest spans a night reads.
    stale_after_s: --stale-after in seconds (0: no note of stale data).
    now: the current UTC time (None: now).

  Returns:
    The notes, in this order: newer span folders without files, spans no night read, stale
    data. A note that cannot be made (a listing or a record that cannot be read) is logged and
    left out.
  """
  try:
    data = _listed(data_root, pattern)
  except Exception as e:  # Object-store clients raise their own types; the run reports them.
    _LOG.warning("The span notes were not made: %s cannot be listed (%s)", data_root, e)
    return []
  records: list[dict[str, Any]] | None = None

  def read_records() -> list[dict[str, Any]]:
    nonlocal records
    if records is None:
      from components.serving import nights

      records = nights.read_records(serving_dir, model_name)
    return records

  notes: list[str] = []
  makers = (
    lambda: _empty_span_notes(data),
    lambda: [_unread_span_note(data, read_records(), rolling_spans)],
    lambda: (
      [_stale_note(data, read_records(), stale_after_s, now or _utc_now())] if stale_after_s else []
    ),
  )
  for make in makers:
    try:
      notes += [note for note in make() if note]
    except Exception as e:  # A note is a view: it must not stop the night.
      _LOG.warning("A span note was not made: %s", e)
  return notes


def empty_span_notes(data_root: str, pattern: str) -> list[str]:
  """Span folders newer than the newest span with files: such a folder holds no file the
  pattern matches (a delivery that failed or is still being written), so the run reads an
  older span, and a night would say "no new data". Only for a pattern whose `{SPAN}` names a
  folder ('span-{SPAN}/*.csv')."""
  return _empty_span_notes(_listed(data_root, pattern))


def unread_span_note(
  data_root: str, pattern: str, serving_dir: str, model_name: str, rolling_spans: int
) -> str:
  """Spans with files that no night read and none will: a night reads the newest
  `rolling_spans` spans, so a span that arrived after a newer one (late), or in the same night
  as a newer one, is never trained. Spans older than the first one a night read (history before
  the first night) are not named. '' where there is none, or no night yet."""
  from components.serving import nights

  records = nights.read_records(serving_dir, model_name)
  return _unread_span_note(_listed(data_root, pattern), records, rolling_spans)


def stale_note(
  data_root: str,
  pattern: str,
  serving_dir: str,
  model_name: str,
  stale_after_s: float,
  now: datetime.datetime,
) -> str:
  """The data is older than `stale_after_s` (--stale-after): the newest span was first read
  longer ago than that, by the nights' records (a copy that keeps its files' times cannot fool
  it), or, without spans, the newest input file was written longer ago. '' while the data is
  fresh or new tonight.

  Args:
    now: the current UTC time (datetime).
  """
  from components.serving import nights

  records = nights.read_records(serving_dir, model_name)
  return _stale_note(_listed(data_root, pattern), records, stale_after_s, now)


def _empty_span_notes(data: _Data) -> list[str]:
  parts = data.full.split("/")
  at = next((i for i, part in enumerate(parts) if spans.SPAN_SPEC in part), None)
  if at is None or at == len(parts) - 1:
    return []
  folder_glob, folder_regex = spans.matching("/".join(parts[: at + 1]))
  rest = "/".join(parts[at + 1 :])
  notes = []
  for folder in sorted({p.rstrip("/") for p in data.fs.glob(folder_glob)}):
    match = re.fullmatch(folder_regex, folder)
    span = int(match["span"]) if match and match["span"].isdigit() else None
    if span is None or (data.newest and span <= data.newest.span):
      continue
    if not data.fs.isdir(folder) or _files(data.fs, f"{folder}/{rest}"):
      continue
    held = sorted(name.rstrip("/") for name in data.fs.listdir(folder))[:3]
    inside = f" (it holds {', '.join(held)})" if held else " (it is empty)"
    read = f"the newest span read is {data.newest.span}" if data.newest else "no span is read"
    shown = folder[len(data.root.rstrip("/")) + 1 :] if folder.startswith(data.root) else folder
    notes.append(f"{shown}/ holds no {rest} file{inside}; {read}")
  return notes


def _unread_span_note(data: _Data, records: Sequence[dict[str, Any]], rolling_spans: int) -> str:
  if spans.SPAN_SPEC not in data.full:
    return ""
  regex = spans.matching(data.full)[1]
  have = {
    int(m["span"])
    for m in (re.fullmatch(regex, p) for p in data.found)
    if m and m["span"].isdigit()
  }
  read = {s for r in records for s in r.get("spans") or []}
  if not have or not read:
    return ""
  tonight = sorted(have)[-max(rolling_spans, 1) :]
  unread = sorted(s for s in have if min(read) < s < tonight[0] and s not in read)
  if not unread:
    return ""
  shown = ", ".join(map(str, unread[:5])) + (
    f" and {len(unread) - 5} more" if len(unread) > 5 else ""
  )
  return (
    f"span {shown} has files that no night read: a night reads the newest "
    f"{len(tonight)} span(s) (--rolling-spans), so a span that came after a newer one, or "
    "with it, is never trained; pass --rolling-spans to read more"
  )


def _stale_note(
  data: _Data, records: Sequence[dict[str, Any]], stale_after_s: float, now: datetime.datetime
) -> str:
  from components.serving import layout

  if spans.SPAN_SPEC in data.full:
    if data.newest is None:
      return ""
    seen = [
      layout.parse_utc(r.get("started"))
      for r in records
      if r.get("spans") and max(r["spans"]) >= data.newest.span
    ]
    seen = [t for t in seen if t is not None]
    if not seen:
      return ""
    since = min(seen)
    what = f"span {data.newest.span} was first read {since:%Y-%m-%d %H:%M UTC}"
  else:
    files = _files(data.fs, data.newest.pattern) if data.newest else data.found
    if not files:
      return ""
    written_ns = max(data.fs.stat(f).mtime_nsec for f in files)
    since = datetime.datetime.fromtimestamp(written_ns / 1e9, datetime.timezone.utc)
    what = f"the newest input file was written {since:%Y-%m-%d %H:%M UTC}"
  age = (now - since).total_seconds()
  if age <= stale_after_s:
    return ""
  return f"no new data for {_age(age)}: {what}"


def _age(seconds: float) -> str:
  if seconds >= 86400:
    return f"{seconds / 86400:.1f} days"
  if seconds >= 3600:
    return f"{seconds / 3600:.1f} h"
  return f"{seconds / 60:.0f} min"


def _utc_now() -> datetime.datetime:
  return datetime.datetime.now(datetime.timezone.utc)
