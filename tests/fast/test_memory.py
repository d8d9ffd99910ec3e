"""What a pipeline process's collector walks (components/memory.py), in a process of its own:
freezing the test process's heap would keep its later garbage."""

import subprocess
import sys

from tests.support.cli_runs import REPO_ROOT

_FREEZES = """
import gc, sys, weakref
from components import memory

assert "colorsys" not in sys.modules
memory.freeze_imports(["colorsys"])
import colorsys

def walked(obj):
  return any(o is obj for o in gc.get_objects())

class Node:
  pass

later = Node()
later.me = later
print(walked(vars(colorsys)), walked(vars(later)), gc.get_freeze_count() > 1000)
gone = weakref.ref(later)
del later
gc.collect()
print(gone() is None)
"""


def test_freeze_imports_takes_the_imported_modules_out_of_the_collectors_walks():
  proc = subprocess.run(
    [sys.executable, "-c", _FREEZES],
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=60,
    check=False,
  )
  assert proc.returncode == 0, proc.stderr
  frozen, collected = proc.stdout.splitlines()
  # The module it imported is no longer walked; an object made afterwards is, and a cycle of
  # them is still collected.
  assert frozen == "False True True"
  assert collected == "True"
