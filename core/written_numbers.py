"""Numbers written for people ("$1,200.50", "12.5%", "(3,400)"): one grammar for every step.

The default model reads a text column of such numbers as numbers (`models.tabular.layers`'
TextNumber, with RE2 in TensorFlow), and the run's up-front checks refuse a label written so
(`pipeline.cli.data_checks`), which would otherwise train as hundreds of classes. Plain Python.
"""

from __future__ import annotations

import re

# A number as spreadsheets and reports write it: a currency sign before or after it, thousands
# separated by commas, a percent sign, a sign or accounting's parentheses for a negative
# ("$1,200.50", "-12.5%", "(3,400)", "12 €"). A decimal comma ("12,5") does not match: in
# "1,200" a comma is a thousands separator. For Python's re and TensorFlow's RE2 alike.
_CURRENCY = "[$€£¥]"
_DIGITS = r"(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_SIGNED = rf"[-+]?\s*(?:{_CURRENCY}\s*[-+]?)?(?:{_DIGITS})(?:\s*(?:%|{_CURRENCY}))?"
NUMBER_PATTERN = rf"\s*(?:{_SIGNED}|\(\s*{_SIGNED}\s*\))\s*"
_NUMBER = re.compile(NUMBER_PATTERN)
# What is left of a cell that matches NUMBER_PATTERN once all but these are taken out is a number
# Python's float and TensorFlow's to_number read; a '(' in the cell makes it negative.
NOT_NUMBER_CHARACTERS = r"[^0-9.eE+-]"
_NOT_NUMBER = re.compile(NOT_NUMBER_CHARACTERS)


def parse_number(text: str) -> float | None:
  """The value of a cell written as NUMBER_PATTERN describes ("$1,200" is 1200.0, "12%" 12.0,
  "(3)" -3.0), as the default model's TextNumber layer reads it; None for any other cell."""
  if not _NUMBER.fullmatch(text):
    return None
  value = float(_NOT_NUMBER.sub("", text))
  return -value if "(" in text else value
