"""models.tabular.text_columns: numbers written for people ("$1,200", "12.5%") in a text column."""

import numpy as np
import pytest

from models.tabular import text_columns


@pytest.mark.parametrize(
  ("cell", "value"),
  [
    ("$1,200.50", 1200.5),
    ("-12.5%", -12.5),
    ("(3,400)", -3400.0),
    ("($5)", -5.0),
    ("12 €", 12.0),
    ("£ 7", 7.0),
    ("$-3", -3.0),
    ("-$3", -3.0),
    ("+4", 4.0),
    (" 7 ", 7.0),
    ("1,234,567.8", 1234567.8),
    ("5.", 5.0),
    (".5", 0.5),
    ("1.5E-05", 1.5e-05),
  ],
)
def test_a_number_written_for_people_is_read_as_its_value(cell, value):
  assert text_columns.parse_number(cell) == pytest.approx(value)


@pytest.mark.parametrize(
  "cell",
  ["", "12,5", "1,20", "12 kg", "abc", "NA", ".", "e5", "1,2345", "$", "%", "(5", "5)x"],
)
def test_anything_else_is_not_a_number(cell):
  # A decimal comma ("12,5") is not guessed at: "1,200" uses the comma for thousands.
  assert text_columns.parse_number(cell) is None


def test_a_column_is_numbers_when_nearly_all_its_cells_are():
  def cells(*values):
    return np.array([v.encode() for v in values], object)

  # Empty cells and missing-value tokens do not count; one cell in 20 may be something else.
  mostly = cells(*[f"${i},000" for i in range(1, 20)], "unknown", "", "N/A", "NA")
  np.testing.assert_allclose(text_columns.number_values(mostly), [i * 1000 for i in range(1, 20)])
  assert text_columns.number_values(cells(*[f"{i}%" for i in range(18)], "a", "b")) is None
  assert text_columns.number_values(cells("red", "blue")) is None
  assert text_columns.number_values(cells("", "NA")) is None
