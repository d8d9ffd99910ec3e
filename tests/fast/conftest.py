"""The fast layer: tests that need no TensorFlow, Beam or TFX, run while working
(`make test-fast`, under two minutes on 2 cores).

A session that asks for nothing outside this folder (`pytest tests/fast/test_x.py`) loads
`tests.support.tf_free`, which refuses those imports, so a test here that needs them fails
loudly; `make test-fast` loads it with `-p` (it also runs tests/unit/test_layout.py). In the
full suite (`make test`) these tests run beside the others, without it.
"""

import pathlib

from tests.support import tf_free

HERE = pathlib.Path(__file__).resolve().parent


def _asks_only_for_this_folder(config) -> bool:
  base = config.invocation_params.dir
  paths = [pathlib.Path(base, arg.split("::")[0]).resolve() for arg in config.args]
  return bool(paths) and all(p == HERE or HERE in p.parents for p in paths)


def pytest_configure(config):
  if _asks_only_for_this_folder(config) and not config.pluginmanager.has_plugin(tf_free.PLUGIN):
    config.pluginmanager.register(tf_free, tf_free.PLUGIN)
