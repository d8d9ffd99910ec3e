"""Input spans: the `{SPAN}`, `{VERSION}` and date placeholders of an input pattern, and the
newest span's files, picked as TFX's ExampleGen driver picks them.

The ExampleGen resolves its pattern with TFX's own driver (`FileBasedDriver`, or the same code
where no driver runs: `example_gen_lib.resolve_without_driver`), which records the span, version
and fingerprint TFX expects on the Examples. The command line reads the data before the run,
without TFX (importing it takes seconds): `newest` is that driver's rule in plain Python (the
pattern's glob and regex, the newest span, then its newest version), so the checks read the
files the run will read. `tests/unit/test_core_spans.py` holds the two to the same answers.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Iterable

# The placeholders, as they begin (`{SPAN:3}` pads the span to 3 digits).
SPAN_SPEC = "{SPAN"
VERSION_SPEC = "{VERSION"
DATE_SPECS = ("{YYYY}", "{MM}", "{DD}")

# TFX's spellings (tfx.components.example_gen.utils): a spec, with its width if any.
_SPAN_FULL = r"{SPAN}|{SPAN:(?P<width>.*?)}"
_VERSION_FULL = r"{VERSION}|{VERSION:(?P<width>.*?)}"
_DATE_GROUPS = ("year", "month", "day")
_EPOCH = datetime.datetime(1970, 1, 1)


def is_unresolved(pattern: str) -> bool:
  """Whether an input pattern still holds a {SPAN}, {VERSION} or date placeholder."""
  return SPAN_SPEC in pattern or VERSION_SPEC in pattern or any(d in pattern for d in DATE_SPECS)


def unresolvable(pattern: str, input_base: str, reason: str) -> str:
  """The one-line message for a pattern whose span cannot be resolved (no number, no match)."""
  return (
    f"cannot resolve the span of {pattern!r} under {input_base} ({reason}); "
    "check the data root and the {SPAN} folders."
  )


@dataclasses.dataclass(frozen=True)
class Resolved:
  """The newest span of a pattern.

  Attributes:
    pattern: the pattern with the span (or date) and version the files were found with.
    span: the span number (days since 1970-01-01 for a date).
    version: the version number, or None without a {VERSION}.
  """

  pattern: str
  span: int
  version: int | None


def _specs(pattern: str) -> tuple[bool, bool, bool]:
  """Which of span, date and version the pattern holds; TFX refuses the same patterns.

  Raises:
    ValueError: for both span and date, a repeated spec, or a version without a span or date.
  """
  spans = re.findall(_SPAN_FULL, pattern)
  versions = re.findall(_VERSION_FULL, pattern)
  date = any(spec in pattern for spec in DATE_SPECS)
  if spans and date:
    raise ValueError(f"Either span spec or date specs must be specified exclusively in {pattern}")
  if len(spans) > 1:
    raise ValueError(f"Only one {{SPAN}} is allowed in {pattern}")
  if date and not all(pattern.count(spec) == 1 for spec in DATE_SPECS):
    raise ValueError(
      f"Exactly one of each date spec ({', '.join(DATE_SPECS)}) is required in {pattern}"
    )
  if versions and not spans and not date:
    raise ValueError(f"Version spec provided, but Span or Date spec is not present in {pattern}")
  if len(versions) > 1:
    raise ValueError(f"Only one {{VERSION}} is allowed in {pattern}")
  return bool(spans), date, bool(versions)


def _width_regex(full: str, name: str, pattern: str) -> str:
  """What a spec's capture matches: `.{width}` with a width modifier, else `.*`."""
  width = re.search(full, pattern).group("width")
  if not width:
    return ".*"
  if not _is_int(width) or int(width) <= 0:
    raise ValueError(f"Width modifier in {name} spec is not a positive integer: {pattern}")
  return f".{{{width}}}"


def _glob_to_regex(glob: str) -> str:
  """A glob as TFX turns it into a regex (`*` and `?` stay within one folder)."""
  regex = glob.replace("\\", "\\\\").replace(".", r"\.").replace("+", r"\+")
  regex = regex.replace("*", r"[^\\/]*").replace("?", r"[^\\/]")
  return regex.replace("(", r"\(").replace(")", r"\)")


def matching(pattern: str) -> tuple[str, str]:
  """The glob listing a pattern's candidate files, and the regex reading their span and version.

  Raises:
    ValueError: for a pattern TFX refuses (see `_specs`, and widths that are not positive).
  """
  span, date, version = _specs(pattern)
  glob, regex = pattern, _glob_to_regex(pattern)
  if span:
    capture = _width_regex(_SPAN_FULL, "span", pattern)
    glob = re.sub(_SPAN_FULL, "*", glob)
    regex = re.sub(_SPAN_FULL, f"(?P<span>{capture})", regex)
  elif date:
    for spec, group, width in zip(DATE_SPECS, _DATE_GROUPS, (4, 2, 2), strict=True):
      glob = glob.replace(spec, "*")
      regex = regex.replace(spec, f"(?P<{group}>.{{{width}}})")
  if version:
    capture = _width_regex(_VERSION_FULL, "version", pattern)
    glob = re.sub(_VERSION_FULL, "*", glob)
    regex = re.sub(_VERSION_FULL, f"(?P<version>{capture})", regex)
  return glob, regex


def _read(path: str, regex: str, date: bool, version: bool) -> tuple[list[str], int, str | None]:
  """A path's span tokens and number, and its version token.

  Raises:
    ValueError: when the path's span, date or version is not a number (or not a date).
  """
  found = re.search(regex, path)
  if found is None:
    raise ValueError("Glob pattern does not match regex pattern")
  groups = _DATE_GROUPS if date else ("span",)
  tokens = [found.group(g) for g in groups]
  try:
    numbers = [int(t) for t in tokens]
  except ValueError:
    raise ValueError(f"Cannot find span number from {path} based on {regex}") from None
  if date:
    try:
      span = (datetime.datetime(*numbers) - _EPOCH).days
    except ValueError:
      raise ValueError(f"Retrieved date is invalid for file: {path}") from None
  else:
    span = numbers[0]
  token = found.group("version") if version else None
  if token is not None and not _is_int(token):
    raise ValueError(f"Cannot find version number from {path} based on {regex}")
  return tokens, span, token


def _is_int(text: str) -> bool:
  try:
    int(text)
  except ValueError:
    return False
  return True


def newest(pattern: str, paths: Iterable[str]) -> Resolved | None:
  """The newest span of `pattern` among `paths` (the files its `matching` glob lists), and of
  that span the newest version, as TFX's driver resolves them.

  Args:
    pattern: the full input pattern (the input base joined), with a span or date placeholder.
    paths: the files the pattern's glob matches.

  Returns:
    The pattern resolved (the files to read are those its glob matches), or None when no path
    matches.

  Raises:
    ValueError: for a pattern TFX refuses, or a path whose span, date or version is not a
      number (TFX's driver fails on it too).
  """
  span_spec, date, version_spec = _specs(pattern)
  _, regex = matching(pattern)
  best: tuple[list[str], int, str | None] | None = None
  for path in paths:
    tokens, span, version = _read(path, regex, date, version_spec)
    if best is None or span > best[1]:
      best = (tokens, span, version)
    elif span == best[1] and (best[2] is None or int(version or 0) >= int(best[2])):
      # Tokens are kept as written: a zero-padded span is found as it is spelled.
      best = (best[0], span, version)
  if best is None or (version_spec and best[2] is None):
    return None
  tokens, span, version = best
  resolved = pattern
  if span_spec:
    resolved = re.sub(_SPAN_FULL, tokens[0], resolved)
  else:
    for spec, token in zip(DATE_SPECS, tokens, strict=True):
      resolved = resolved.replace(spec, token)
  if version_spec:
    resolved = re.sub(_VERSION_FULL, version, resolved)
  return Resolved(resolved, span, None if version is None else int(version))
