"""The memory of a pipeline process: what the cyclic collector walks, and what goes back.

`release` hands memory a component freed back to the operating system before the next one
starts. LocalDagRunner runs every component in one process, so what one component freed but the
allocators kept (glibc's heap, Arrow's pool) adds to the next one's peak (docs/performance.md
has what StatisticsGen and the trainer left behind at 1,000,000 rows).

`freeze_imports` takes the libraries' own objects out of the cyclic collector's walks. Importing
TensorFlow, TFX, Beam, TFDV and TFMA leaves about 650,000 objects that live as long as the
process, and every full collection walks all of them: in a run of the digits with
`--train-steps`, 14 full collections took 3.0 s of its 14 s of CPU, and a process holding them
took 1.6 to 1.8 s to exit (the interpreter's last collections). Frozen, the same run's full
collections took 1.4 s and the exit 0.1 s (docs/performance.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import importlib
import logging
from collections.abc import Iterable

_LOG = logging.getLogger(__name__)


def release() -> None:
  """Collects garbage, empties Arrow's pool and trims glibc's heap (where there is glibc)."""
  gc.collect()
  try:
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
  except (ImportError, AttributeError):  # pragma: no cover - pyarrow is in the lock
    pass
  name = ctypes.util.find_library("c")
  if not name:
    return
  try:
    ctypes.CDLL(name).malloc_trim(0)
  except (OSError, AttributeError):  # Not glibc (musl, macOS): nothing to trim.
    _LOG.debug("malloc_trim is not available here.")


def freeze_imports(modules: Iterable[str] = ()) -> None:
  """Imports `modules`, then moves every object alive now out of the collector's reach.

  Call it once, after the imports and before the work: what is alive then (modules, classes,
  functions and the libraries' registries) lives until the process ends. The collector still
  collects everything created later; objects alive now are never collected as cycles, so a
  process that calls this after building large data would keep that data for good.
  `gc.freeze` is what CPython offers for this (its documentation names a forking server).

  Args:
    modules: modules the process will import anyway, imported now so that theirs are frozen
      too.
  """
  for name in modules:
    importlib.import_module(name)
  gc.collect()
  gc.freeze()
