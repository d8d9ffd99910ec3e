"""Loaded by every Python process started with this folder on PYTHONPATH (the fast layer puts
it there): with TFXKIT_TF_FREE=1, the process refuses TensorFlow, Beam and TFX from its start
(tests/support/import_blocker.py)."""

import os

if os.environ.get("TFXKIT_TF_FREE") == "1":
  import importlib.util
  import sys

  _NAME = "tests.support.import_blocker"
  if _NAME not in sys.modules:
    _PATH = os.path.join(
      os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "import_blocker.py"
    )
    _SPEC = importlib.util.spec_from_file_location(_NAME, _PATH)
    _MODULE = importlib.util.module_from_spec(_SPEC)
    sys.modules[_NAME] = _MODULE
    _SPEC.loader.exec_module(_MODULE)
  sys.modules[_NAME].install()
