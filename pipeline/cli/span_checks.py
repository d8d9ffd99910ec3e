"""The span folders of the data before anything heavy runs: the files the input pattern picks
(the newest span's, as the ExampleGen's driver picks them), and the spans written in a way
TFX's driver would not find. What a night is told of its spans is `components.nights.span_notes`.

Plain Python; nothing here imports TensorFlow. A mistake is one `error:` line naming the fix (a
CheckError).
"""

from __future__ import annotations

import os
import re

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
