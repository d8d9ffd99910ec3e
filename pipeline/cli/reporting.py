"""How a run ends for its user: one line for a mistake, the traceback of their code or ours."""

from __future__ import annotations

import errno
import os
import re
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import NoReturn

from core.errors import UserCodeError, UserInputError, chain, find

# How a full disk reads once TensorFlow, Beam or SQLite (ML Metadata) have wrapped the OSError.
_DISK_FULL_TEXTS = (os.strerror(errno.ENOSPC), "database or disk is full")
_FILE_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT)


def fail(message: str) -> int:
  """Prints a user error as one line and returns the exit code."""
  print(f"error: {message}", file=sys.stderr)
  return 2


# TFX imports a --module-file from a wheel it builds, so errors name it `<module>@<wheel>`.
_PACKAGED_MODULE = re.compile(r"(\w+)@\S*?tfx_user_code_\S*?\.whl")


def user_error_message(
  exc: BaseException,
  output_dir: str | None = None,
  module_files: Sequence[str | None] = (),
  folders: Mapping[str, str] | None = None,
) -> str | None:
  """The one-line message of a user-caused error anywhere in the cause chain, else None.

  Args:
    exc: The exception that stopped the run.
    output_dir: Named in the message when the disk is full and the error names no file.
    module_files: --module-file and --transform-module: a packaged module is named by its file.
    folders: the run's folders by flag (--output-dir, --serving-dir, --pipeline-root): a file
      error names the flag of the folder holding its file, and a full disk with no file named,
      the local folder with the least space left. None: --output-dir and `output_dir`.

  Returns:
    One line naming the fix, or None for errors that are our own bugs.
  """
  folders = dict(folders or {}) or ({"--output-dir": output_dir} if output_dir else {})
  line = _error_line(exc, folders)
  if line is None:
    return None
  by_module = {os.path.splitext(os.path.basename(f))[0]: f for f in module_files if f}
  return _PACKAGED_MODULE.sub(lambda m: by_module.get(m.group(1), m.group(1) + ".py"), line)


def _error_line(exc: BaseException, folders: Mapping[str, str]) -> str | None:
  error = find(exc, UserInputError)
  if error is not None:
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    # Beam appends the failing step to errors it re-raises.
    return re.sub(r"\s*\[while running '.*'\]\s*$", "", line)
  code_error = find(exc, UserCodeError)
  if code_error is not None:
    return str(code_error)
  os_error = find(exc, OSError)
  if os_error is not None and os_error.errno in _FILE_ERRNOS:
    full = os_error.errno in (errno.ENOSPC, errno.EDQUOT)
    flag, folder = _folder_of(os_error.filename, folders, full)
    where = os_error.filename or folder
    return (
      f"{os.strerror(os_error.errno).lower()}{f' at {where}' if where else ''}; free space, fix "
      f"the permissions or pass another {flag}."
    )
  if any(is_disk_full(e) for e in chain(exc)):
    flag, folder = _folder_of(None, folders, full=True)
    return (
      f"no space left on device{f' under {folder}' if folder else ''}; "
      f"free space or use another {flag}."
    )
  return None


def _folder_of(
  filename: str | None, folders: Mapping[str, str], full: bool
) -> tuple[str, str | None]:
  """(flag, folder) of the run's folder an error is in: the one holding `filename`, else for a
  full disk the local one with the least space left, else --output-dir's."""
  local = {flag: str(path) for flag, path in folders.items() if path and "://" not in str(path)}
  if filename:
    holding = [
      (len(path), flag, path)
      for flag, path in local.items()
      if os.path.abspath(str(filename)).startswith(os.path.abspath(path).rstrip("/") + "/")
    ]
    if holding:
      _, flag, path = max(holding)
      return flag, path
  if full and len(local) > 1:
    free = {flag: _free_bytes(path) for flag, path in local.items()}
    known = {flag: n for flag, n in free.items() if n is not None}
    if known:
      flag = min(known, key=lambda f: (known[f], list(local).index(f)))
      return flag, local[flag]
  return "--output-dir", folders.get("--output-dir")


def _free_bytes(path: str) -> int | None:
  """Free bytes of the file system holding `path` (its nearest existing folder)."""
  import shutil

  while path and not os.path.exists(path):
    parent = os.path.dirname(path)
    if parent == path:
      return None
    path = parent
  try:
    return shutil.disk_usage(path).free
  except OSError:
    return None


def user_code_error(exc: BaseException, module_files: Sequence[str | None]) -> UserCodeError | None:
  """A UserCodeError for an exception raised inside the user's module code, else None.

  Our trainer wraps errors from run_fn itself; stock components (Transform calling
  preprocessing_fn, the Tuner calling tuner_fn) do not, so the runner looks for the user's code
  in the tracebacks of the exception chain. TFX imports module files from a packaged copy, so
  their frames are matched by file name. A module file may import helpers from files beside it
  (TFX's penguin_utils_keras.py calls penguin_utils_base.py's preprocessing_fn); frames in a
  Python file of a module file's own folder are the user's too, unless that file is the kit's.

  Args:
    exc: the exception that stopped the run.
    module_files: --module-file and --transform-module (None when not given).
  """
  by_name = {os.path.basename(f): f for f in module_files if f}
  folders = {_folder(f) for f in module_files if f and "://" not in f}
  found = None
  for e in chain(exc):
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
      path = _users_file(frame.filename, by_name, folders)
      if path:  # the deepest exception of the chain that passed through the user's code wins
        found = UserCodeError(path, frame.name, e)
        found.__cause__ = e
        break
  return found


def _folder(path: str) -> str:
  return os.path.dirname(os.path.realpath(path))


# The kit's own packages: their files are never the user's, wherever a module file lies.
_KIT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
_KIT_FOLDERS = tuple(
  os.path.join(_KIT_ROOT, name) + os.sep for name in ("components", "core", "models", "pipeline")
)


def _users_file(filename: str, by_name: dict[str, str], folders: set[str]) -> str | None:
  """The user's file a traceback frame ran in (their module file as they named it, or a file
  beside it), or None."""
  if not filename:
    return None
  if os.path.basename(filename) in by_name:
    return by_name[os.path.basename(filename)]
  if not filename.endswith(".py") or _folder(filename) not in folders:
    return None
  real = os.path.realpath(filename)
  return None if real.startswith(_KIT_FOLDERS) else filename


def print_user_traceback(exc: BaseException) -> None:
  """Prints the traceback of an error raised in the user's module code, if that is the cause."""
  code_error = find(exc, UserCodeError)
  if code_error is None or find(exc, UserInputError) is not None:
    return
  cause = code_error.__cause__ or code_error
  traceback.print_exception(type(cause), cause, cause.__traceback__, file=sys.stderr)


def is_disk_full(exc: BaseException) -> bool:
  """Whether an error says the disk is full (ENOSPC, possibly wrapped by another library)."""
  if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
    return True
  return any(text in str(exc) for text in _DISK_FULL_TEXTS)


def exit_process(code: int) -> NoReturn:
  """Exits with `code` once the output is flushed."""
  sys.stdout.flush()
  sys.stderr.flush()
  # tensorflow-io (s3://) aborts the interpreter in its exit-time destructors; the run's work
  # is done and flushed, so leave without them and keep the run's exit code.
  if "tensorflow_io" in sys.modules:
    os._exit(code)
  sys.exit(code)
