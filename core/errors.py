"""The one error contract: what a user caused (one line) and what their module code raised."""

from __future__ import annotations

import re
from collections.abc import Iterator

# TensorFlow's prefix on an error raised inside a traced function, and the node it names.
_TF_FUNCTION_NODE = re.compile(r"^(\{\{function_node [^}]*\}\}\s*)+")
# ... and the op (and name) it appends to an eagerly raised one.
_TF_OP_SUFFIX = re.compile(r"\s*\[Op:[^\]]*\](\s+name:.*)?$")


class UserInputError(ValueError):
  """Bad data, a wrong option, a missing file or missing hardware; the message names the fix.

  Every component error a user can fix derives from this class. Runners recognise it with
  `isinstance` anywhere in an exception's cause chain and print its first line, without a
  traceback.
  """


class UserCodeError(RuntimeError):
  """An exception raised inside the user's own module code (run_fn, preprocessing_fn, ...).

  Its traceback is the user's to read, so runners print it, and then one last line naming
  the module file and the function (`str(error)`).

  Attributes:
    module: the module file (or module path) the function came from.
    function: the function's name.

  A `note` adds what is known to cause such failures (it is appended to the message).
  """

  def __init__(self, module: str, function: str, cause: BaseException, note: str = ""):
    self.module = module
    self.function = function
    super().__init__(
      f"{function} in {module} raised {type(cause).__name__}: {first_line(cause)}; the "
      f"traceback above points into that function.{' ' + note if note else ''}"
    )


def first_line(error: BaseException) -> str:
  """The line of an exception's message that says what went wrong.

  That is its first line, except for TensorFlow's errors from a traced function, whose
  message opens with "Graph execution error:" and the stack of the node that failed: there it
  is the first line after that stack; and without TensorFlow's `{{function_node ...}}` prefix
  and `[Op:...] name: ...` suffix.
  """
  lines = [line for line in str(error).strip().splitlines() if line.strip()]
  if lines and lines[0].strip() == "Graph execution error:":
    # The stack under "Detected at node ..." is indented; the message follows it.
    rest = [line for line in lines[1:] if not line.startswith((" ", "\t", "Detected at node"))]
    lines = rest or lines
  if not lines:
    return "(no message)"
  line = _TF_OP_SUFFIX.sub("", _TF_FUNCTION_NODE.sub("", lines[0].strip()))
  return line or lines[0].strip()


def chain(error: BaseException) -> Iterator[BaseException]:
  """`error`, then each exception it was raised from or while handling, once each.

  The one walk of the cause/context chain: the runners' error reporting reads a chain only
  through this (and `find`).
  """
  seen: set[int] = set()
  current: BaseException | None = error
  while current is not None and id(current) not in seen:
    seen.add(id(current))
    yield current
    current = current.__cause__ or current.__context__


def find(error: BaseException, kind: type[BaseException]) -> BaseException | None:
  """The first exception of type `kind` in the cause/context chain of `error`, or None.

  Args:
    error: the exception that stopped a run.
    kind: the class to look for (instances of subclasses match too).

  Returns:
    The matching exception, or None.
  """
  return next((e for e in chain(error) if isinstance(e, kind)), None)
