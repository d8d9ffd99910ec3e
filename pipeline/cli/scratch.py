"""A run's own temporary folder.

The libraries a run uses write to the system's temporary folder: TensorFlow's AutoGraph writes
the source of every function it converts there, and removes it only at a normal interpreter
exit, which a run that loaded tensorflow-io does not have (`reporting.exit_process`). So a
run points `tempfile` and `TMPDIR` (for the processes it starts: Beam's and the trainer's
workers) at a folder of its own, and removes that folder when it ends, however it ends short
of a kill; the next run removes the folder of a run that was killed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

PREFIX = "tfxkit-run-"


def _pid_of(name: str) -> int | None:
  head = name[len(PREFIX) :].split("-", 1)[0]
  return int(head) if head.isdigit() else None


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # Another user's process.
    return True
  return True


def remove_stale(base: str) -> list[str]:
  """Removes the run folders under `base` whose process is gone (a run that was killed);
  returns their paths."""
  removed = []
  with contextlib.suppress(OSError):
    for name in os.listdir(base):
      pid = _pid_of(name) if name.startswith(PREFIX) else None
      if pid is None or pid == os.getpid() or _alive(pid):
        continue
      path = os.path.join(base, name)
      shutil.rmtree(path, ignore_errors=True)
      removed.append(path)
  return removed


@contextlib.contextmanager
def run_folder() -> Iterator[str]:
  """Inside the block, this process's temporary files, and those of the processes it starts,
  go to a new folder under the system's temporary folder, removed at the block's end."""
  base = tempfile.gettempdir()
  remove_stale(base)
  folder = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base)
  previous, previous_env = tempfile.tempdir, os.environ.get("TMPDIR")
  tempfile.tempdir = folder
  os.environ["TMPDIR"] = folder
  try:
    yield folder
  finally:
    tempfile.tempdir = previous
    if previous_env is None:
      os.environ.pop("TMPDIR", None)
    else:
      os.environ["TMPDIR"] = previous_env
    shutil.rmtree(folder, ignore_errors=True)
