"""Texts that stand for no value in a cell (NA, N/A, NULL, ...): one rule for every step.

The ExampleGen reads such a cell in a number column as empty and counts a label written so as
missing; the data gate does not take a label written so for a new class; the run summary and
the report page say how many rows such labels left out (`label_tokens_note`). Plain Python: the
ExampleGen applies the same rule to whole Arrow columns through `MISSING_PATTERN`.
"""

import re

# Cells that stand for "no value" in tables written by R (NA, and NaN for 0/0), pandas and
# spreadsheets (N/A, #N/A, NULL, None, and NaN, nan and <NA> where a float or nullable column is
# written by hand or with na_rep), SAS (.) and the UCI repository (?). Here the rules differ from
# stock, on purpose: in a column whose other cells are numbers these are empty cells, so the
# column stays numeric (palmerpenguins' penguins.csv writes NA, and stock makes its measurements
# text). In a text column they stay text, as the country code NA must.
MISSING_TOKENS = (
  *("NA", "N/A", "n/a", "#N/A", "NULL", "null", "None", "?", "-", "."),
  *("NaN", "nan", "<NA>"),
  # Excel's error values, which a sheet exported to CSV writes where a formula failed.
  *("#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#NULL!"),
)
# A cell that is one of MISSING_TOKENS, white space around it allowed, for Arrow's regular
# expressions (RE2, whose \s is the five characters of _SPACE).
MISSING_PATTERN = "^\\s*(?:" + "|".join(re.escape(t) for t in MISSING_TOKENS) + ")\\s*$"
_SPACE = "\t\n\f\r "


def is_missing(cell: str) -> bool:
  """Whether a text cell is one of MISSING_TOKENS, as `MISSING_PATTERN` matches it.

  Args:
    cell: the cell's text.

  Returns:
    True when the cell, white space around it aside, is a missing-value token.
  """
  return cell.strip(_SPACE) in MISSING_TOKENS


def label_tokens_note(tokens: dict[str, int]) -> str:
  """What the summary and the report say of the rows left out for a text label written as a
  missing token, e.g. "label NA in 11 rows; --task multiclass learns it as a class".

  Args:
    tokens: token -> rows left out (the Examples' unlabeled label tokens).

  Returns:
    The note, or "" without tokens.
  """
  if not tokens:
    return ""
  counts = ", ".join(f"{t} in {n:,} row{'s' if n != 1 else ''}" for t, n in tokens.items())
  pronoun = "it" if len(tokens) == 1 else "them"
  noun = "a class" if len(tokens) == 1 else "classes"
  return f"label {counts}; --task multiclass learns {pronoun} as {noun}"
