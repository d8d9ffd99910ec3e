"""The missing-value rule (core/missing_values.py): the plain-Python test and Arrow's pattern
agree on every token with every kind of white space around it."""

import pyarrow as pa
import pyarrow.compute as pc

from core import missing_values

_SPACES = ["", " ", "\t", "\n", "\r", "\f", "\v", "\xa0", "\u2003", "  \t"]


def test_is_missing_agrees_with_the_arrow_pattern():
  words = (*missing_values.MISSING_TOKENS, "na", "NaN", "--", "N A", "", "x")
  cells = [f"{a}{w}{b}" for w in words for a in _SPACES for b in _SPACES]
  arrow = pc.match_substring_regex(pa.array(cells, pa.string()), missing_values.MISSING_PATTERN)
  assert [missing_values.is_missing(c) for c in cells] == arrow.to_pylist()


def test_tokens_are_missing_and_other_text_is_not():
  assert all(missing_values.is_missing(f" {t}\t") for t in missing_values.MISSING_TOKENS)
  assert not any(missing_values.is_missing(c) for c in ("", "NA NA", "none", "0", "\vNA"))
