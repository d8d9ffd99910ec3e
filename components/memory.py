"""Hands memory a component freed back to the operating system before the next one starts.

LocalDagRunner runs every component in one process, so what one component freed but the
allocators kept (glibc's heap, Arrow's pool) adds to the next one's peak (docs/performance.md
has what StatisticsGen and the trainer left behind at 1,000,000 rows).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging

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
