"""The span folders of the data before anything heavy runs: the files the input pattern picks
(the newest span's, as the ExampleGen's driver picks them), and what a night should be told of
its spans: a newer folder without files, spans no night read, data that stopped coming.

Plain Python and the serving folder's records; nothing here imports TensorFlow. A mistake is
one `error:` line naming the fix (a CheckError); a note is a line for the night's record.
"""

from __future__ import annotations

import datetime
import glob
import os
import re

from components import storage
from core import spans
from pipeline.cli.checks import CheckError


def input_files(data_root: str, pattern: str) -> list[str]:
  """The files a pattern matches (local or object store); with a `{SPAN}` or date placeholder,
  the newest span's (and version's), as the ExampleGen's driver picks them (`spans.newest`).

  Raises:
    CheckError: when an object store cannot be listed, or the span cannot be resolved.
  """
  full = os.path.join(data_root, pattern)
  if not spans.is_unresolved(full):
    return _glob(full, full)
  try:
    candidates = spans.matching(full)[0]
  except ValueError as e:  # TFX's driver refuses the same patterns.
    raise CheckError(spans.unresolvable(pattern, data_root, str(e))) from None
  found = _glob(candidates, full)
  try:
    newest = spans.newest(full, found)
  except ValueError as e:  # A file whose span is not a number: TFX's driver fails on it too.
    raise CheckError(spans.unresolvable(pattern, data_root, str(e))) from None
  if newest and spans.SPAN_SPEC + "}" in full:
    _refuse_leading_zeros(full, found, newest, data_root)
  return _glob(newest.pattern, full) if newest else []


def _refuse_leading_zeros(full: str, found: list[str], newest, data_root: str) -> None:
  """Under a plain `{SPAN}`, TFX's ExampleGen looks for the newest span as its number reads
  ('span-3/'); a folder that writes it with leading zeros ('span-03/') it never finds."""
  regex = spans.matching(full)[1]
  tokens = {m["span"] for m in (re.fullmatch(regex, path) for path in found) if m}
  padded = sorted(t for t in tokens if t.isdigit() and int(t) == newest.span and t != str(int(t)))
  if padded:
    raise CheckError(
      f"the newest span under {data_root} is written with leading zeros ({padded[0]}), and "
      f"TFX's ExampleGen reads {{SPAN}} as {newest.span}, so it would find no file; rename the "
      "span folders without leading zeros, or, where every span is written with the same width, "
      "give --input-pattern that width (e.g. 'span-{SPAN:2}/*.csv')."
    )


def empty_span_notes(data_root: str, pattern: str) -> list[str]:
  """What the summary and the night's record say of span folders newer than the newest span
  with files: such a folder holds no file the pattern matches (a delivery that failed or is
  still being written), so the run reads an older span, and a night would say "no new data".

  Only for a pattern whose `{SPAN}` names a folder ('span-{SPAN}/*.csv'), on local data.
  """
  full = os.path.join(data_root, pattern)
  parts = full.split("/")
  at = next((i for i, part in enumerate(parts) if spans.SPAN_SPEC in part), None)
  if at is None or at == len(parts) - 1 or storage.is_remote(full):
    return []
  folder_glob, folder_regex = spans.matching("/".join(parts[: at + 1]))
  rest = "/".join(parts[at + 1 :])
  found = _glob(spans.matching(full)[0], full)
  newest = spans.newest(full, found) if found else None
  notes = []
  for folder in sorted(p for p in glob.glob(folder_glob) if os.path.isdir(p)):
    match = re.fullmatch(folder_regex, folder)
    span = int(match["span"]) if match and match["span"].isdigit() else None
    if span is None or (newest and span <= newest.span) or _glob(f"{folder}/{rest}", full):
      continue
    held = sorted(os.listdir(folder))[:3]
    inside = f" (it holds {', '.join(held)})" if held else " (it is empty)"
    read = f"the newest span read is {newest.span}" if newest else "no span is read"
    notes.append(f"{os.path.relpath(folder, data_root)}/ holds no {rest} file{inside}; {read}")
  return notes


def unread_span_note(
  data_root: str, pattern: str, serving_dir: str, model_name: str, rolling_spans: int
) -> str:
  """What the night says of spans with files that no night read and none will: a night reads
  the newest `rolling_spans` spans, so a span that arrived after a newer one (late), or in the
  same night as a newer one, is never trained. Spans older than the first one a night read
  (history before the first night) are not named. '' where there is none, or no night yet.
  """
  from components.serving import nights

  full = os.path.join(data_root, pattern)
  if spans.SPAN_SPEC not in full or storage.is_remote(full):
    return ""
  regex = spans.matching(full)[1]
  found = _glob(spans.matching(full)[0], full)
  have = {
    int(m["span"]) for m in (re.fullmatch(regex, p) for p in found) if m and m["span"].isdigit()
  }
  read = {s for r in nights.read_records(serving_dir, model_name) for s in r.get("spans") or []}
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


def stale_note(
  data_root: str, pattern: str, serving_dir: str, model_name: str, stale_after_s: float, now
) -> str:
  """What the night says when its data is older than `stale_after_s` (--stale-after): the
  newest span first read longer ago than that, by the nights' records (a copy that keeps its
  files' times cannot fool it), or, without spans, the newest input file written longer ago.
  '' while the data is fresh, new tonight, or not local (files without spans).

  Args:
    now: the current UTC time (datetime).
  """
  from components.serving import layout, nights

  full = os.path.join(data_root, pattern)
  if spans.SPAN_SPEC in full:
    newest = spans.newest(full, _glob(spans.matching(full)[0], full))
    records = nights.read_records(serving_dir, model_name) if newest else []
    seen = [
      layout.parse_utc(r.get("started"))
      for r in records
      if r.get("spans") and max(r["spans"]) >= newest.span
    ]
    seen = [t for t in seen if t is not None]
    if not seen:
      return ""
    since = min(seen)
    what = f"span {newest.span} was first read {since:%Y-%m-%d %H:%M UTC}"
  else:
    files = [] if storage.is_remote(full) else input_files(data_root, pattern)
    if not files:
      return ""
    since = datetime.datetime.fromtimestamp(
      max(os.path.getmtime(f) for f in files), datetime.timezone.utc
    )
    what = f"the newest input file was written {since:%Y-%m-%d %H:%M UTC}"
  age = (now - since).total_seconds()
  if age <= stale_after_s:
    return ""
  if age >= 86400:
    return f"no new data for {age / 86400:.1f} days: {what}"
  return f"no new data for {age / 3600:.1f} h: {what}"


def _glob(path: str, shown: str) -> list[str]:
  """The files a glob matches; `shown` is the pattern a listing error names."""
  from components.example_gen import io_lib

  try:
    return io_lib.glob(path)
  except Exception as e:  # Object-store clients raise their own error types.
    raise CheckError(
      f"cannot list {shown} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
      "check the path and the credentials, or pass --task to skip reading the data here."
    ) from None
