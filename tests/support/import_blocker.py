"""A `sys.meta_path` finder that refuses TensorFlow, Beam and TFX: the fast layer's guard.

Standard library only, so that `tf_free_site/sitecustomize.py` can load it in every Python
process a fast test starts, before anything else. The pytest side is `tf_free`.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import traceback

# The packages the fast layer refuses: each costs seconds of CPU to import, or pulls one in.
# Every `tensorflow_*` package too (TFDV, TFMA, TFT, the model optimization toolkit, io, ...),
# but tensorflow_metadata: the Schema and statistics protos, protobuf alone (30 ms, no
# TensorFlow), which the runners' checks read before anything heavy loads.
HEAVY = ("tensorflow", "apache_beam", "tfx", "tfx_bsl", "ml_metadata", "keras", "tf_keras")
LIGHT = ("tensorflow_metadata",)
# Set (to "1") in the environment of a fast session, so that the Python processes its tests
# start refuse the same packages (through SITE_DIR's sitecustomize on PYTHONPATH).
ENV = "TFXKIT_TF_FREE"
SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_free_site")


def is_heavy(name: str) -> bool:
  """Whether module `name` is one of HEAVY, a `tensorflow_*` package but LIGHT, or inside one."""
  top = name.partition(".")[0]
  return top in HEAVY or (top.startswith("tensorflow_") and top not in LIGHT)


def loaded() -> list[str]:
  """The heavy packages this process has already imported."""
  return sorted(name for name in sys.modules if "." not in name and is_heavy(name))


def message(fullname: str) -> str:
  return (
    f"import of {fullname!r} refused: the fast test layer (tests/fast/, make test-fast) runs "
    "without TensorFlow, Beam and TFX. Test this code in tests/unit/ (or another layer), or "
    "keep the heavy import out of the code path under test."
  )


class Blocker(importlib.abc.MetaPathFinder):
  """Refuses HEAVY modules with an ImportError that says why, and records each attempt."""

  def __init__(self):
    self.attempts: list[tuple[str, str]] = []

  def find_spec(self, fullname, path=None, target=None):
    if not is_heavy(fullname):
      return None
    # The innermost frames outside the import machinery: who asked for the module.
    frames = [
      f
      for f in traceback.extract_stack()[:-1]
      if "importlib" not in f.filename and f.filename != __file__
    ]
    self.attempts.append((fullname, "".join(traceback.format_list(frames[-3:]))))
    raise ImportError(message(fullname), name=fullname)


def installed() -> Blocker | None:
  """The Blocker on `sys.meta_path`, if one is."""
  return next((f for f in sys.meta_path if isinstance(f, Blocker)), None)


def install() -> Blocker:
  """Puts a Blocker first on `sys.meta_path` (once per process) and returns it.

  Raises:
    RuntimeError: when a HEAVY package was imported already (refusing it now would be a lie).
  """
  blocker = installed()
  if blocker is None:
    already = loaded()
    if already:
      raise RuntimeError(
        f"the fast layer cannot run TF-free: {', '.join(already)} was imported before its "
        "import blocker was installed."
      )
    blocker = Blocker()
    sys.meta_path.insert(0, blocker)
  return blocker


def export_to_children() -> None:
  """Makes the Python processes started from here on (that inherit the environment) refuse
  the same packages."""
  os.environ[ENV] = "1"
  paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
  if SITE_DIR not in paths:
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [SITE_DIR, *paths] if p)
