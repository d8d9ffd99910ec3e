"""Input spans (core/spans.py): the placeholders, and the newest span's files as TFX's driver
picks them (tests/unit/test_spans_match_tfx.py holds the two side by side)."""

import pytest

from core import spans


def test_is_unresolved():
  assert spans.is_unresolved("span-{SPAN}/*")
  assert spans.is_unresolved("span-{SPAN:3}/v{VERSION}/*")
  assert spans.is_unresolved("{YYYY}-{MM}-{DD}/*")
  assert not spans.is_unresolved("span-3/*")


def test_the_newest_span_is_the_largest_number_not_the_last_name():
  paths = ["/d/span-2/a.csv", "/d/span-10/a.csv", "/d/span-10/b.csv", "/d/span-9/a.csv"]
  assert spans.matching("/d/span-{SPAN}/*.csv")[0] == "/d/span-*/*.csv"
  assert spans.newest("/d/span-{SPAN}/*.csv", paths) == spans.Resolved("/d/span-10/*.csv", 10, None)


def test_a_zero_padded_span_is_resolved_as_it_is_spelled():
  paths = ["/d/span-007/a.csv", "/d/span-010/a.csv"]
  assert spans.newest("/d/span-{SPAN}/*.csv", paths).pattern == "/d/span-010/*.csv"
  assert spans.newest("/d/span-{SPAN:3}/*.csv", paths) == spans.Resolved(
    "/d/span-010/*.csv", 10, None
  )


def test_the_newest_version_of_the_newest_span():
  paths = ["/d/span-2/v9/a.csv", "/d/span-3/v1/a.csv", "/d/span-3/v2/a.csv"]
  found = spans.newest("/d/span-{SPAN}/v{VERSION}/*.csv", paths)
  assert found == spans.Resolved("/d/span-3/v2/*.csv", 3, 2)


def test_a_date_is_a_span_of_days_since_1970():
  paths = ["/d/2024-01-31/a.csv", "/d/2024-02-01/a.csv", "/d/2023-12-31/a.csv"]
  found = spans.newest("/d/{YYYY}-{MM}-{DD}/*.csv", paths)
  assert found.pattern == "/d/2024-02-01/*.csv" and found.span == 19754
  assert spans.matching("/d/{YYYY}-{MM}-{DD}/*.csv")[0] == "/d/*-*-*/*.csv"


def test_no_match_is_none():
  assert spans.newest("/d/span-{SPAN}/*.csv", []) is None


@pytest.mark.parametrize(
  ("pattern", "paths", "message"),
  [
    ("/d/span-{SPAN}/*.csv", ["/d/span-old/a.csv"], "Cannot find span number from"),
    ("/d/v{VERSION}/*.csv", [], "Version spec provided, but Span or Date spec is not present"),
    ("/d/{SPAN}/{SPAN}/*", [], "Only one {SPAN} is allowed"),
    ("/d/{SPAN}/{YYYY}-{MM}-{DD}/*", [], "Either span spec or date specs"),
    ("/d/{YYYY}-{MM}/*", [], r"Exactly one of each date spec \({YYYY}, {MM}, {DD}\)"),
    ("/d/span-{SPAN:x}/*", [], "Width modifier in span spec is not a positive integer"),
    ("/d/{YYYY}-{MM}-{DD}/*", ["/d/2024-02-30/a"], "Retrieved date is invalid"),
  ],
)
def test_patterns_and_files_tfx_refuses_are_refused(pattern, paths, message):
  with pytest.raises(ValueError, match=message):
    spans.newest(pattern, paths)


def test_the_unresolvable_message_names_the_pattern_and_the_fix():
  assert spans.unresolvable("span-{SPAN}/*", "/data", "no number") == (
    "cannot resolve the span of 'span-{SPAN}/*' under /data (no number); check the data root "
    "and the {SPAN} folders."
  )
