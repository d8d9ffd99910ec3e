"""CsvInputError and the messages that tell a user how to fix their CSV input."""

from __future__ import annotations

import contextlib
import gzip
import zlib
from collections.abc import Sequence

from components.example_gen import io_lib
from core.errors import UserInputError

# Characters of a row or of a parser message quoted in a message or a quarantine file.
MAX_QUOTED_TEXT = 500
_LIKELY_DELIMITERS = {";": "';'", "\t": "'\\t'", "|": "'|'", ",": "','"}


class CsvInputError(UserInputError):
  """The CSV input cannot be ingested; the message names the file and the fix."""


@contextlib.contextmanager
def damaged_gzip_as_input_error(path: str):
  """Turns a truncated or mislabelled gzip file into a CsvInputError naming the file.

  Python's gzip raises EOFError or BadGzipFile, and Arrow an OSError from zlib; none of them
  says which file, and each reads as a bug of ours.
  """
  try:
    yield
  except (EOFError, gzip.BadGzipFile, zlib.error) as e:
    raise CsvInputError(
      f"{path} is a damaged gzip file ({e}); re-create it with gzip, or pass it uncompressed."
    ) from None
  except OSError as e:
    text = str(e)
    if "zlib" not in text and "gzip" not in text.lower():
      raise
    if not io_lib.is_gzip(path):
      raise CsvInputError(
        f"{path} ends in .gz but is not gzip-compressed; rename it to .csv or gzip it."
      ) from None
    raise CsvInputError(
      f"{path} is a damaged gzip file ({text}); re-create it with gzip, or pass it uncompressed."
    ) from None


def shown_names(names: Sequence[str], limit: int = 10) -> str:
  """Column names for a message: the first `limit`, and how many there are in all."""
  shown = ", ".join(repr(n) for n in names[:limit])
  return shown + (f" ... ({len(names)} columns)" if len(names) > limit else "")


def delimiter_hint(names: Sequence[str], delimiter: str) -> str:
  """A clause suggesting --delimiter when a one-column header holds another likely delimiter."""
  if len(names) != 1:
    return ""
  for d, shown in _LIKELY_DELIMITERS.items():
    if d != delimiter and d in names[0]:
      name = "tab" if d == "\t" else repr(d)
      return f"the header looks {name}-delimited, so pass --delimiter {shown}"
  return ""
