"""The import direction docs/layout.md draws: runners -> cli -> definition -> components, and
models -> components, with the trainer reaching models only by module-path strings."""

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
  for folder in ("components", "models", "pipeline/definition", "pipeline/cli"):
    assert _files(folder), folder


@pytest.mark.parametrize(
  ("folder", "forbidden"),
  [
    # The trainer loads models by module path (core.defaults), as it loads a user's.
    ("components", ("pipeline", "models", "tests", "bench")),
    ("models", ("pipeline", "tests", "bench")),
    ("pipeline/definition", ("pipeline.cli", "models", "tests", "bench")),
    ("pipeline/cli", ("tests", "bench")),
  ],
)
def test_no_import_runs_back_up(folder, forbidden):
  assert _offending(folder, forbidden) == []


def _defines(path: pathlib.Path) -> set[str]:
  """The top-level functions of a module file."""
  tree = ast.parse(path.read_text(encoding="utf-8"))
  return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_the_module_paths_the_trainer_loads_name_functions_in_models():
  from core import defaults

  module = REPO_ROOT / (defaults.DEFAULT_MODULE_PATH.replace(".", "/") + ".py")
  assert {defaults.RUN_FN, defaults.TUNER_FN} <= _defines(module)
  host, _, function = defaults.BUILD_MODEL_RUN_FN.rpartition(".")
  assert function in _defines(REPO_ROOT / (host.replace(".", "/") + ".py"))
  assert {defaults.DEFAULT_MODULE_PATH, host} <= {
    ".".join(p.relative_to(REPO_ROOT).with_suffix("").parts) for p in _files("models")
  }


def _keras_model_code(path: pathlib.Path) -> list[str]:
  """Keras layers a file defines or builds: Layer subclasses, keras.layers and feature columns."""
  found = []
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.ClassDef):
      bases = [ast.unparse(b) for b in node.bases]
      found += [f"class {node.name}({b})" for b in bases if b.split(".")[-1] == "Layer"]
    elif (
      isinstance(node, ast.Attribute)
      and node.attr in ("layers", "feature_column")
      and ast.unparse(node.value).split(".")[-1] in ("keras", "tf")
    ):
      found.append(ast.unparse(node))
  return found


def test_the_trainer_defines_no_keras_layer_or_feature_transform():
  offending = {
    str(path.relative_to(REPO_ROOT)): _keras_model_code(path)
    for path in _files("components/distributed_trainer")
    if _keras_model_code(path)
  }
  assert offending == {}
  # The check sees what it looks for: the default model's layers and its network.
  assert _keras_model_code(REPO_ROOT / "models/tabular/layers.py")
  assert _keras_model_code(REPO_ROOT / "models/tabular/model.py")


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


# The serving folder's files and logs, and the names the serving package gives them.
SERVING_FILE_NAMES = ("manifest.json", "history.jsonl", "nights.jsonl", ".nights-open")
SERVING_FOLDER_NAMES = (".history", ".nights")
SERVING_NAME_CONSTANTS = (
  "MANIFEST_FILE",
  "HISTORY",
  "NIGHTS",
  "OPEN_DIR",
  "HISTORY_FILE",
  "HISTORY_DIR",
  "NIGHTS_FILE",
  "NIGHTS_DIR",
)
SERVING_PACKAGE = REPO_ROOT / "components" / "serving"


def _docstrings(tree: ast.AST) -> set[int]:
  nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
  return {
    id(node.body[0].value)
    for node in ast.walk(tree)
    if isinstance(node, nodes)
    and node.body
    and isinstance(node.body[0], ast.Expr)
    and isinstance(node.body[0].value, ast.Constant)
  }


def _serving_names(path: pathlib.Path) -> list[str]:
  """The serving folder's file names (as literals, docstrings aside) and name constants a
  module uses."""
  tree = ast.parse(path.read_text(encoding="utf-8"))
  docstrings = _docstrings(tree)
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
      if id(node) in docstrings:
        continue
      found += [n for n in SERVING_FILE_NAMES if n in node.value]
      found += [n for n in SERVING_FOLDER_NAMES if node.value == n]
    elif isinstance(node, ast.Attribute) and node.attr in SERVING_NAME_CONSTANTS:
      found.append(node.attr)
    elif isinstance(node, ast.ImportFrom):
      found += [a.name for a in node.names if a.name in SERVING_NAME_CONSTANTS]
  return found


def test_only_the_serving_package_names_the_serving_folders_files():
  offending = [
    f"{path.relative_to(REPO_ROOT)} names {name}"
    for folder in ("components", "pipeline", "bench")
    for path in _files(folder)
    if SERVING_PACKAGE not in path.parents
    for name in _serving_names(path)
  ]
  assert offending == []


def test_the_serving_names_check_sees_literals_and_constants(tmp_path):
  module = tmp_path / "m.py"
  module.write_text(
    '"""Reads manifest.json (a docstring may say so)."""\n'
    "from components.serving.layout import HISTORY\n\n"
    "def f(layout, d):\n"
    '  """Not history.jsonl either."""\n'
    '  return open(d + "/manifest.json"), layout.OPEN_DIR, f"{d}/.nights"\n'
  )
  assert sorted(_serving_names(module)) == ["HISTORY", "OPEN_DIR", "manifest.json"]


def _alias_constants(path: pathlib.Path) -> list[str]:
  """Module-level constants bound to another module's constant (`NAME = module.OTHER`)."""
  found = []
  for node in ast.parse(path.read_text(encoding="utf-8")).body:
    if (
      isinstance(node, ast.Assign)
      and len(node.targets) == 1
      and isinstance(node.targets[0], ast.Name)
      and node.targets[0].id.isupper()
      and isinstance(node.value, ast.Attribute)
      and node.value.attr.isupper()
      and isinstance(node.value.value, ast.Name | ast.Attribute)
    ):
      found.append(f"{node.targets[0].id} = {ast.unparse(node.value)}")
  return found


def _split_literals(path: pathlib.Path) -> list[str]:
  """The split names "train" and "eval" as string literals (docstrings aside)."""
  tree = ast.parse(path.read_text(encoding="utf-8"))
  docstrings = _docstrings(tree)
  return [
    f"line {node.lineno}: {node.value!r}"
    for node in ast.walk(tree)
    if isinstance(node, ast.Constant)
    and node.value in ("train", "eval")
    and id(node) not in docstrings
  ]


def _offending_files(rule: str, check, skip: tuple[str, ...] = ()) -> list[str]:
  return [
    f"{path.relative_to(REPO_ROOT)}: {found}"
    for folder in ("components", "pipeline")
    for path in _files(folder)
    if path.relative_to(REPO_ROOT).as_posix() not in skip
    for found in check(path)
  ]


def test_no_constant_is_bound_under_a_second_name():
  assert _offending_files("alias", _alias_constants) == []


def test_the_split_names_are_spelt_only_in_properties():
  from core import properties

  assert (properties.TRAIN_SPLIT, properties.EVAL_SPLIT) == ("train", "eval")
  assert _offending_files("split", _split_literals, skip=("components/properties.py",)) == []


def _absl_logging(path: pathlib.Path) -> list[str]:
  """`from absl import logging` (the CLI may configure absl's handler, as `absl_logging`)."""
  return [
    "from absl import logging"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
    if isinstance(node, ast.ImportFrom)
    and node.module == "absl"
    and any(a.name == "logging" and a.asname is None for a in node.names)
  ]


def test_components_log_through_std_logging():
  assert _offending_files("absl", _absl_logging) == []


def _declares_a_spec(path: pathlib.Path) -> list[str]:
  tree = ast.parse(path.read_text(encoding="utf-8"))
  return [n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Spec")]


def test_each_component_declares_its_spec_in_spec_py():
  offending = [
    f"{path.relative_to(REPO_ROOT)}: {name}"
    for path in _files("components")
    if path.name != "spec.py"
    for name in _declares_a_spec(path)
  ]
  assert offending == []


def test_the_name_checks_see_what_they_look_for(tmp_path):
  module = tmp_path / "m.py"
  module.write_text(
    '"""Reads the "train" split."""\n'
    "from absl import logging\n"
    "from absl import logging as absl_logging\n"
    "from components import properties\n\n"
    "KEY = properties.SERVING_DIR_KEY\n"
    "OWN = 'own'\n"
    "SPLITS = ('train', 'eval')\n\n"
    "class ThingSpec:\n"
    "  pass\n"
  )
  assert _alias_constants(module) == ["KEY = properties.SERVING_DIR_KEY"]
  assert _split_literals(module) == ["line 8: 'train'", "line 8: 'eval'"]
  assert _absl_logging(module) == ["from absl import logging"]
  assert _declares_a_spec(module) == ["ThingSpec"]
