"""ExampleGen's merged results: the units' counts and bad rows added up and checked."""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Sequence

from components.example_gen import csv_batch, csv_convert, csv_errors, csv_profile, io_lib

QUARANTINE_DIR = "Quarantine"
QUARANTINE_FILE = "bad_rows.csv"
RESULTS_DIR = ".unit_results"


@dataclasses.dataclass(frozen=True)
class Outcome:
  """The merged result of every unit.

  Attributes:
    rows: Data rows read.
    bad_rows: Rows quarantined.
    rows_per_split: Examples written per split.
    quarantine_uri: The merged bad-row file, or "" when every row was good.
    label_stats: split -> csv_profile.LabelCounts JSON of the label column, when there is one.
    unlabeled_rows: Of the quarantined rows, those left out only for an empty label.
    unlabeled_tokens: Of those, the rows whose text label is a missing token, by token.
  """

  rows: int
  bad_rows: int
  rows_per_split: dict[str, int]
  quarantine_uri: str
  label_stats: dict[str, dict] = dataclasses.field(default_factory=dict)
  unlabeled_rows: int = 0
  unlabeled_tokens: dict[str, int] = dataclasses.field(default_factory=dict)


def offset_line_numbers(results: Sequence[csv_convert.UnitResult], rows: list[dict]) -> list[dict]:
  """Makes chunk-relative line numbers absolute, given every chunk's result."""
  offsets: dict[tuple[str, int], int] = {}
  for path in {r.file for r in results}:
    # Chunks start after the header line; a whole-file unit counts it itself.
    total = 1 if any(r.lines for r in results if r.file == path) else 0
    for r in sorted((r for r in results if r.file == path), key=lambda r: r.chunk):
      offsets[(path, r.chunk)] = total
      total += r.lines
  for row in rows:
    row["line"] = int(row["line"]) + offsets.get((row["file"], int(row.get("chunk", 0))), 0)
  return rows


def read_results(results_dir: str) -> list[csv_convert.UnitResult]:
  """Reads the results the units wrote (csv_convert.ConvertUnitFn), then deletes them."""
  results = []
  for path in io_lib.glob(os.path.join(results_dir, f"{csv_convert.RESULT_PREFIX}*")):
    with io_lib.open_read(path) as f:
      lines = f.read().decode("utf-8").splitlines()
    results.extend(csv_convert.UnitResult.from_json(line) for line in lines if line.strip())
  io_lib.rmtree(results_dir)
  return results


def _merged_label_stats(
  results: Sequence[csv_convert.UnitResult], split_names: Sequence[str]
) -> dict[str, dict]:
  """split -> the label column's LabelCounts JSON over every unit, for splits with rows."""
  label_stats = {}
  for split in split_names:
    counts = csv_profile.LabelCounts()
    for r in results:
      if split in r.label_stats:
        counts.merge(csv_profile.LabelCounts.from_json(r.label_stats[split]))
    if counts.rows:
      label_stats[split] = counts.to_json()
  return label_stats


def _leave_out_hint(blamed: set[str | None], label_key: str | None) -> str:
  """Where every bad row is bad in one column, not the label: how to keep the rows without
  that column."""
  if len(blamed) != 1:
    return ""
  (column,) = blamed
  if column is None or column == label_key:
    return ""
  return (
    f", or, if the model need not read {column!r}, pass --exclude-columns {column} (the rows "
    "are then kept, with that cell empty)"
  )


def _merge_quarantine(
  results: Sequence[csv_convert.UnitResult], parts: Sequence[str], quarantine_uri: str
) -> tuple[str, set[str | None]]:
  """Writes the units' bad rows to one file, by file and absolute line, and deletes the parts.

  Returns:
    The failure message's note of the first malformed row ("" when every bad row only lacks a
    label), and the columns the malformed rows are blamed on.
  """
  first_bad = ""
  blamed: set[str | None] = set()
  merged = offset_line_numbers(results, list(csv_convert.iter_quarantine_rows(parts)))
  merged.sort(key=lambda r: (r["file"], r["line"]))
  malformed = [r for r in merged if not csv_batch.is_missing_label(r["reason"])]
  if malformed:
    first = malformed[0]
    first_bad = f" (the first, line {first['line']} of {first['file']}: {first['reason']})"
    blamed = {csv_batch.bad_column(r["reason"]) for r in malformed}
  csv_convert.write_quarantine(quarantine_uri, merged)
  for p in parts:
    io_lib.remove(p)
  return first_bad, blamed


def merge_results(
  results: Sequence[csv_convert.UnitResult],
  split_names: Sequence[str],
  max_bad_row_fraction: float,
  examples_uri: str,
  label_key: str | None = None,
) -> Outcome:
  """Adds up the units' results, merges their bad rows, and checks the outcome.

  The bad rows of a run that fails are kept beside the output folder, since the
  launcher deletes a failed execution's output. Rows without a label are quarantined too, but
  they are not malformed, so they do not count against `max_bad_row_fraction`: like a Vertex
  AI tabular dataset's rows without a target, they are left out and counted.

  Args:
    results: Every unit's result.
    split_names: Output split names.
    max_bad_row_fraction: Largest share of bad rows tolerated.
    examples_uri: The Examples artifact's folder.
    label_key: The label column, which the message never offers to leave out.

  Returns:
    Counts and the quarantine file.

  Raises:
    CsvInputError: for a unit's user error, no data rows, too many bad rows,
      or a split left empty.
  """
  errors = sorted((r.file, r.chunk, r.error) for r in results if r.error)
  if errors:
    raise csv_errors.CsvInputError(errors[0][2])
  rows = sum(r.rows_read for r in results)
  bad = sum(r.bad_rows for r in results)
  unlabeled = sum(r.unlabeled_rows for r in results)
  counted = collections.Counter()
  for r in results:
    counted.update(r.unlabeled_tokens)
  tokens = dict(sorted(counted.items()))
  per_split = {s: sum(r.rows_per_split.get(s, 0) for r in results) for s in split_names}
  label_stats = _merged_label_stats(results, split_names)
  failing = rows == 0 or (bad - unlabeled) / rows > max_bad_row_fraction
  quarantine_uri = ""
  first_bad = ""
  blamed: set[str | None] = set()
  parts = sorted(r.quarantine_file for r in results if r.quarantine_file)
  if parts:
    quarantine_uri = (
      examples_uri.rstrip("/") + ".quarantine.csv"
      if failing
      else os.path.join(examples_uri, QUARANTINE_DIR, QUARANTINE_FILE)
    )
    first_bad, blamed = _merge_quarantine(results, parts, quarantine_uri)
  if rows == 0:
    raise csv_errors.CsvInputError(
      f"the input has a header but no data rows ({', '.join(r.file for r in results)}); "
      "add rows or point the data root at the right files."
    )
  if failing:
    besides = f" (besides {unlabeled} without a label)" if unlabeled else ""
    raise csv_errors.CsvInputError(
      f"{bad - unlabeled} of {rows} rows ({(bad - unlabeled) / rows:.2%}) are bad{first_bad}"
      f"{besides}, more than the allowed {max_bad_row_fraction:.2%}; see {quarantine_uri} and "
      f"fix those rows or raise --max-bad-row-fraction{_leave_out_hint(blamed, label_key)}."
    )
  if rows == bad and unlabeled:
    raise csv_errors.CsvInputError(
      f"none of the {rows} rows has a label and well-formed cells ({unlabeled} have an empty "
      f"label; see {quarantine_uri}); fill the label column or check --label-key."
    )
  for split, n in per_split.items():
    if n == 0:
      raise csv_errors.CsvInputError(
        f"split {split!r} received no rows from {rows - bad} good rows; add data or change "
        "the split ratio."
      )
  return Outcome(rows, bad, per_split, quarantine_uri, label_stats, unlabeled, tokens)
