"""Names of the artifact properties one component writes and others read.

One owner, so that a writer and its readers cannot drift apart; a module that reads a property
another component writes imports its name from here.
"""

# Examples (the kit's CsvExampleGen): rows written to each split, "num_rows_<split>".
EXAMPLES_ROWS_PREFIX = "num_rows_"
# Examples: rows quarantined as bad.
EXAMPLES_BAD_ROWS = "num_bad_rows"


def examples_rows(split: str) -> str:
  """The property holding the number of rows the ExampleGen wrote to `split`."""
  return f"{EXAMPLES_ROWS_PREFIX}{split}"
