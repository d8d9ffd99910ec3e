"""The fast layer's pytest plugin: a session that refuses TensorFlow, Beam and TFX.

`make test-fast` loads it with `-p tests.support.tf_free`; `tests/fast/conftest.py` loads it
when a session asks for nothing outside `tests/fast/`. From then on, importing any of
`import_blocker.HEAVY` (or a submodule) raises ImportError naming the module and saying why,
in this process and in the Python processes its tests start. So a test that needs TensorFlow,
directly or through the code it tests, fails instead of making the fast layer slow. Catching
that ImportError does not hide it: a test during which an import was refused fails at
teardown, and one refused during collection stops the session.
"""

from __future__ import annotations

import pytest

from tests.support import import_blocker

PLUGIN = "tests.support.tf_free"


def _report(attempts: list[tuple[str, str]]) -> str:
  return "\n".join(
    f"{import_blocker.message(name)}\nRequested at:\n{where}" for name, where in attempts
  )


def _attempts() -> list[tuple[str, str]]:
  blocker = import_blocker.installed()
  return blocker.attempts if blocker else []


def active() -> bool:
  """Whether this process refuses the heavy packages."""
  return import_blocker.installed() is not None


def pytest_configure():
  try:
    import_blocker.install()
  except RuntimeError as error:
    raise pytest.UsageError(str(error)) from None
  import_blocker.export_to_children()


def pytest_report_header():
  return "fast layer: TensorFlow, Beam and TFX imports are refused (tests/support/tf_free.py)"


_SEEN = pytest.StashKey[int]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
  """Fails a test phase during which an import was refused, even if the test caught the error
  (a phase that failed anyway keeps its own report, which shows the ImportError)."""
  report = yield
  refused = _attempts()[item.stash[_SEEN] :]
  item.stash[_SEEN] = len(_attempts())
  if refused and report.passed:
    report.outcome = "failed"
    report.longrepr = _report(refused)
  return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
  item.stash[_SEEN] = len(_attempts())


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
  """An import refused during collection stops the session, even one a module caught."""
  if _attempts():
    raise session.Interrupted(_report(_attempts()))
