"""The import direction docs/layout.md draws: runners -> cli -> definition -> components."""

import ast
import pathlib

import pytest

from tests.support.cli_runs import REPO_ROOT

RUNNERS = ("run_local.py", "run_kubeflow.py", "schedule.py", "rollback.py")


def _imports(path: pathlib.Path) -> set[str]:
  """Every module a file imports, at any depth (function-level imports included)."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Import):
      found.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      found.add(node.module)
      found.update(f"{node.module}.{alias.name}" for alias in node.names)
  return found


def _files(folder: str) -> list[pathlib.Path]:
  return sorted((REPO_ROOT / folder).rglob("*.py"))


def _forbidden(names: set[str], forbidden: tuple[str, ...]) -> list[str]:
  return sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in forbidden))


def _offending(folder: str, forbidden: tuple[str, ...]) -> list[str]:
  return [
    f"{path.relative_to(REPO_ROOT)} imports {name}"
    for path in _files(folder)
    for name in _forbidden(_imports(path), forbidden)
  ]


def test_the_folders_hold_python_files():
  for folder in ("components", "pipeline/definition", "pipeline/cli"):
    assert _files(folder), folder


@pytest.mark.parametrize(
  ("folder", "forbidden"),
  [
    ("components", ("pipeline", "tests", "bench")),
    ("pipeline/definition", ("pipeline.cli", "tests", "bench")),
    ("pipeline/cli", ("tests", "bench")),
  ],
)
def test_no_import_runs_back_up(folder, forbidden):
  assert _offending(folder, forbidden) == []


def test_the_checker_sees_an_import_inside_a_function(tmp_path):
  module = tmp_path / "m.py"
  module.write_text("import pipeline_pb2\n\ndef f():\n  from pipeline.cli import flags\n")
  assert _forbidden(_imports(module), ("pipeline",)) == ["pipeline.cli", "pipeline.cli.flags"]


@pytest.mark.parametrize("runner", RUNNERS)
def test_runners_are_thin_and_call_into_cli(runner):
  path = REPO_ROOT / "pipeline" / runner
  lines = path.read_text(encoding="utf-8").splitlines()
  assert len(lines) <= 80, f"{runner} has {len(lines)} lines"
  assert any(name.startswith("pipeline.cli") for name in _imports(path)), runner


def test_test_modules_share_code_only_through_support():
  offending = [
    f"{path.relative_to(REPO_ROOT)} imports {name}"
    for path in sorted((REPO_ROOT / "tests").rglob("test_*.py"))
    for name in sorted(_imports(path))
    if name.startswith("tests.") and name.split(".")[-1].startswith("test_")
  ]
  assert offending == []
