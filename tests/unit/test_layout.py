"""The import direction docs/layout.md draws: runners -> cli -> definition -> components, and
models -> components, with the trainer reaching models only by module-path strings. And the
package graph's rules: no component folder imports another, no two packages import each other
(directly or round a cycle), core/ imports nothing heavy, models/ reach the trainer only through
its API module, and files and functions stay short (500 and 80 lines)."""

import ast
import dataclasses
import functools
import itertools
import pathlib
import subprocess
import sys
import textwrap

import pytest

from tests.support.cli_runs import REPO_ROOT

RUNNERS = ("run_local.py", "run_kubeflow.py", "schedule.py", "rollback.py")


def _imports(path: pathlib.Path) -> set[str]:
  """Every module a file imports, at any depth (function-level imports included)."""
  found = set()
  for node in ast.walk(_tree(path)):
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
  tree = _tree(path)
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
  for node in ast.walk(_tree(path)):
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
  tree = _tree(path)
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
  for node in _tree(path).body:
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
  tree = _tree(path)
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
    for node in ast.walk(_tree(path))
    if isinstance(node, ast.ImportFrom)
    and node.module == "absl"
    and any(a.name == "logging" and a.asname is None for a in node.names)
  ]


def test_components_log_through_std_logging():
  assert _offending_files("absl", _absl_logging) == []


def _declares_a_spec(path: pathlib.Path) -> list[str]:
  tree = _tree(path)
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


# The package graph: component folders import no other, packages form no cycle, files and
# functions stay short, core/ stays TF-free, and models/ reach the trainer through its API.

LAYERS = ("core", "components", "models", "pipeline")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
# What models/ may import of the trainer: its published API module, nothing else of the folder.
TRAINER = "components.distributed_trainer"
TRAINER_API = "components.distributed_trainer.trainer_api"
REPORT = "components.report"
# What core/ never imports: the other layers, and TensorFlow, Beam, TFX and their kin.
CORE_FORBIDDEN = ("components", "models", "pipeline")
HEAVY = ("tensorflow", "apache_beam", "tfx", "tfx_bsl", "ml_metadata", "keras", "tf_keras")


@dataclasses.dataclass(frozen=True)
class Import:
  """One imported module: `from m import n` is m.n where m.n is a module or package, else m."""

  path: pathlib.Path
  line: int
  name: str


def _tree(path: pathlib.Path) -> ast.Module:
  return _parse(path.read_text(encoding="utf-8"))


@functools.cache
def _parse(text: str) -> ast.Module:
  return ast.parse(text)


def _within(name: str, prefix: str) -> bool:
  return name == prefix or name.startswith(prefix + ".")


def _heavy(name: str) -> bool:
  top = name.partition(".")[0]
  return top in HEAVY or top.startswith("tensorflow_")


class Source:
  """The Python files of core/, components/, models/ and pipeline/ under `root`, as modules
  (`components.data_gate.gate_lib`) in packages (each folder of .py files: `pipeline.cli`)."""

  def __init__(self, root: pathlib.Path):
    self.root = root
    self.files = sorted(p for layer in LAYERS for p in (root / layer).rglob("*.py"))
    self.module = {path: self._name(path) for path in self.files}
    self.packages = {".".join(p.parent.relative_to(root).parts) for p in self.files}
    self.known = set(self.module.values()) | self.packages

  def _name(self, path: pathlib.Path) -> str:
    parts = path.relative_to(self.root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

  def rel(self, path: pathlib.Path) -> str:
    return path.relative_to(self.root).as_posix()

  def package_of(self, path: pathlib.Path) -> str:
    return ".".join(path.parent.relative_to(self.root).parts)

  def imports(self, path: pathlib.Path) -> list[Import]:
    """Every module `path` imports, at any depth (function-level imports included)."""
    found = []
    for node in ast.walk(_tree(path)):
      if isinstance(node, ast.Import):
        found += [Import(path, node.lineno, alias.name) for alias in node.names]
      elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # Relative: from the file's package, one level up per extra dot.
          package = self.package_of(path).split(".")
          anchor = package[: len(package) - node.level + 1]
          base = ".".join([*anchor, *([base] if base else [])])
        for alias in node.names:
          name = f"{base}.{alias.name}"
          found.append(Import(path, node.lineno, name if name in self.known else base))
    # `from m import a, b` of one module m is one import of it.
    return sorted(dict.fromkeys(found), key=lambda item: item.line)

  def resolve(self, name: str) -> str | None:
    """The module or package of ours that `name` is or lies in; None for another's."""
    while name and name not in self.known:
      name = name.rpartition(".")[0]
    return name or None

  def package_of_module(self, name: str) -> str:
    return name if name in self.packages else name.rpartition(".")[0]

  def under(self, folder: str) -> list[pathlib.Path]:
    return [p for p in self.files if _within(self.module[p], folder.replace("/", "."))]

  def component_folders(self) -> list[str]:
    return sorted(
      self.package_of(p) for p in self.root.glob("components/*/component.py") if p in self.module
    )


def _where(item: Import, source: Source) -> str:
  return f"{source.rel(item.path)}:{item.line} imports {item.name}"


def _component_imports(source: Source) -> list[str]:
  """Imports from one component folder into another (`from components import x` included)."""
  folders = source.component_folders()
  found = []
  for folder in folders:
    for path in source.under(folder):
      for item in source.imports(path):
        target = source.resolve(item.name) or ""
        others = [f for f in folders if f != folder and _within(target, f)]
        found += [f"{_where(item, source)} (component folder {f})" for f in others]
  return found


def _package_edges(source: Source) -> dict[str, dict[str, list[Import]]]:
  """package -> {package it imports: the imports that say so}."""
  edges: dict[str, dict[str, list[Import]]] = {p: {} for p in sorted(source.packages)}
  for path in source.files:
    package = source.package_of(path)
    for item in source.imports(path):
      target = source.resolve(item.name)
      if target:
        other = source.package_of_module(target)
        if other != package:
          edges[package].setdefault(other, []).append(item)
  return edges


def _more(count: int) -> str:
  return f" (and {count} more import{'s' if count > 1 else ''})" if count else ""


def _tangles(edges: dict[str, dict[str, list[Import]]]) -> list[list[str]]:
  """The strongly connected sets of two or more packages (Tarjan's algorithm), sorted."""
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  stack: list[str] = []
  found = []

  def visit(node: str) -> None:
    index[node] = low[node] = len(index)
    stack.append(node)
    for other in edges[node]:
      if other not in index:
        visit(other)
        low[node] = min(low[node], low[other])
      elif other in stack:
        low[node] = min(low[node], index[other])
    if low[node] == index[node]:
      members = []
      while not members or members[-1] != node:
        members.append(stack.pop())
      if len(members) > 1:
        found.append(sorted(members))

  for node in edges:
    if node not in index:
      visit(node)
  return sorted(found)


def _shortest_cycle(edges: dict[str, dict[str, list[Import]]], members: list[str]) -> list[str]:
  """The shortest cycle through the tangle's packages, from the first one back to it."""
  best: list[str] = []
  for start in members:
    paths = {start: [start]}
    queue = [start]
    while queue:
      node = queue.pop(0)
      if start in edges[node] and (not best or len(paths[node]) < len(best) - 1):
        best = [*paths[node], start]
      for other in edges[node]:
        if other in members and other not in paths:
          paths[other] = [*paths[node], other]
          queue.append(other)
  return best


def _package_cycles(source: Source) -> list[str]:
  """Each set of packages that import one another in a circle, printed as one of its cycles
  with the import behind each step."""
  edges = _package_edges(source)
  found = []
  for members in _tangles(edges):
    cycle = _shortest_cycle(edges, members)
    steps = [
      f"  {a} -> {b}: {_where(edges[a][b][0], source)}{_more(len(edges[a][b]) - 1)}"
      for a, b in itertools.pairwise(cycle)
    ]
    tangle = f" (of {len(members)} packages: {', '.join(members)})" if len(members) > 2 else ""
    found.append("\n".join([f"cycle {' -> '.join(cycle)}{tangle}", *steps]))
  return found


def _long_files(source: Source) -> list[str]:
  return [
    f"{source.rel(path)}: {count} lines"
    for path in source.files
    if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES
  ]


def _long_functions(source: Source) -> list[str]:
  functions = (ast.FunctionDef, ast.AsyncFunctionDef)
  return [
    f"{source.rel(path)}:{node.lineno} {node.name}: {length} lines"
    for path in source.files
    for node in sorted(
      (n for n in ast.walk(_tree(path)) if isinstance(n, functions)), key=lambda n: n.lineno
    )
    if (length := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES
  ]


def _core_imports(source: Source) -> list[str]:
  """What core/ imports of the other layers, or of TensorFlow, Beam, TFX and their kin."""
  return [
    _where(item, source)
    for path in source.under("core")
    for item in source.imports(path)
    if _heavy(item.name) or any(_within(item.name, layer) for layer in CORE_FORBIDDEN)
  ]


def _model_imports(source: Source, api: str = TRAINER_API) -> list[str]:
  """What models/ imports of the trainer other than its API module, and of the report."""
  return [
    _where(item, source)
    for path in source.under("models")
    for item in source.imports(path)
    if (_within(item.name, TRAINER) and not _within(item.name, api)) or _within(item.name, REPORT)
  ]


@functools.lru_cache(maxsize=1)
def _repository() -> Source:
  return Source(REPO_ROOT)


def _say(found: list[str]) -> str:
  return "\n" + "\n".join(found)


def test_no_component_folder_imports_another():
  assert _repository().component_folders(), "no components/*/component.py found"
  found = _component_imports(_repository())
  assert not found, _say(found)


def test_the_packages_import_one_another_without_cycles():
  found = _package_cycles(_repository())
  assert not found, _say(found)


def test_no_file_is_over_500_lines():
  found = _long_files(_repository())
  assert not found, _say(found)


def test_no_function_is_over_80_lines():
  found = _long_functions(_repository())
  assert not found, _say(found)


def test_core_imports_no_other_layer_and_nothing_heavy():
  assert _repository().under("core")
  found = _core_imports(_repository())
  assert not found, _say(found)


def test_core_modules_import_without_tensorflow():
  """The same at run time: importing every core module loads none of the heavy packages."""
  modules = sorted(_repository().module[p] for p in _repository().under("core"))
  script = (
    "import sys\n"
    f"for name in {modules!r}:\n"
    "  __import__(name)\n"
    f"print(sorted(m for m in sys.modules if m.partition('.')[0] in {HEAVY!r} "
    "or m.startswith('tensorflow_')))\n"
  )
  done = subprocess.run(
    [sys.executable, "-c", script],
    check=False,
    capture_output=True,
    text=True,
    cwd=REPO_ROOT,
    timeout=120,
  )
  assert done.returncode == 0, done.stderr
  assert done.stdout.strip() == "[]"


def test_models_reach_the_trainer_only_through_its_api():
  found = _model_imports(_repository())
  assert not found, _say(found)


def _write_tree(root: pathlib.Path, files: dict[str, str]) -> Source:
  for name, text in files.items():
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
  return Source(root)


def test_the_component_check_sees_every_import_between_component_folders(tmp_path):
  source = _write_tree(
    tmp_path,
    {
      "components/__init__.py": "",
      "components/shared.py": "from components.a import lib\n",
      "components/a/__init__.py": "",
      "components/a/component.py": "from components import b, shared\nfrom . import lib\n",
      "components/a/lib.py": "def f():\n  from components.b.deep import g\n",
      "components/a/sub/x.py": "import components.b\nfrom ...b import deep\n",
      "components/b/__init__.py": "",
      "components/b/component.py": "from components import a as first\n",
      "components/b/deep.py": "from components.shared import f\n",
      "components/nights/lib.py": "",
      "components/c/component.py": "from components.nights import lib\n",
    },
  )
  assert source.component_folders() == ["components.a", "components.b", "components.c"]
  assert _component_imports(source) == [
    "components/a/component.py:1 imports components.b (component folder components.b)",
    "components/a/lib.py:2 imports components.b.deep (component folder components.b)",
    "components/a/sub/x.py:1 imports components.b (component folder components.b)",
    "components/a/sub/x.py:2 imports components.b.deep (component folder components.b)",
    "components/b/component.py:1 imports components.a (component folder components.a)",
  ]


def test_the_cycle_check_prints_each_cycle_with_its_imports(tmp_path):
  source = _write_tree(
    tmp_path,
    {
      "core/a.py": "import json\n",
      "components/__init__.py": "",
      "components/x/lib.py": "def f():\n  from components.y import lib\n",
      "components/y/lib.py": "from components.z.lib import g\n",
      "components/z/lib.py": "import components.x.lib\nfrom core import a\n",
      "models/m.py": "from components.x import lib\n",
      "pipeline/cli/run.py": "from pipeline import main\n",
      "pipeline/main.py": "from pipeline.cli import run\n",
    },
  )
  assert _package_cycles(source) == [
    "cycle components.x -> components.y -> components.z -> components.x (of 3 packages: "
    "components.x, components.y, components.z)\n"
    "  components.x -> components.y: components/x/lib.py:2 imports components.y.lib\n"
    "  components.y -> components.z: components/y/lib.py:1 imports components.z.lib\n"
    "  components.z -> components.x: components/z/lib.py:1 imports components.x.lib",
    "cycle pipeline -> pipeline.cli -> pipeline\n"
    "  pipeline -> pipeline.cli: pipeline/main.py:1 imports pipeline.cli.run\n"
    "  pipeline.cli -> pipeline: pipeline/cli/run.py:1 imports pipeline.main",
  ]
  (tmp_path / "pipeline/cli/run.py").write_text("import json\n")
  (tmp_path / "components/z/lib.py").write_text("from core import a\n")
  assert _package_cycles(Source(tmp_path)) == []


def _assignments(count: int, indent: str) -> str:
  return "".join(f"{indent}x{i} = {i}\n" for i in range(count))


def test_the_length_checks_count_lines_as_they_say(tmp_path):
  source = _write_tree(
    tmp_path,
    {
      "core/short.py": "x = 1\n" * MAX_FILE_LINES,
      "models/long.py": "x = 1\n" * (MAX_FILE_LINES + 1),
      "pipeline/f.py": (
        # Lines 1-80: fits, 80 lines from def to return.
        f"def fits():\n{_assignments(78, '  ')}  return 0\n\n"
        # Lines 82-163: a method of 81 lines.
        f"class C:\n  async def over(self):\n{_assignments(79, '    ')}    return 0\n\n"
        # Lines 165-247: a function of 83 lines, holding one of 81.
        f"def outer():\n  def inner():\n{_assignments(79, '    ')}    return 0\n  return inner\n"
      ),
    },
  )
  assert _long_files(source) == [f"models/long.py: {MAX_FILE_LINES + 1} lines"]
  assert _long_functions(source) == [
    "pipeline/f.py:83 over: 81 lines",
    "pipeline/f.py:165 outer: 83 lines",
    "pipeline/f.py:166 inner: 81 lines",
  ]


def test_the_core_check_sees_other_layers_and_heavy_imports_at_any_depth(tmp_path):
  source = _write_tree(
    tmp_path,
    {
      "core/__init__.py": "import json\nfrom core import tasks\n",
      "core/tasks.py": """\
        import os
        from collections import abc

        def f():
          import tensorflow.compat.v1 as tf
          from tf_keras import layers
          from tensorflow_transform import tft
          import keras, apache_beam
          from tfx_bsl.public import tfxio
          from ml_metadata import metadata_store

        class C:
          def g(self):
            from components import errors
            from pipeline.cli import flags
            import models.tabular
      """,
      "components/errors.py": "import tensorflow\n",
    },
  )
  assert _core_imports(source) == [
    f"core/tasks.py:{line} imports {name}"
    for line, name in [
      (5, "tensorflow.compat.v1"),
      (6, "tf_keras"),
      (7, "tensorflow_transform"),
      (8, "keras"),
      (8, "apache_beam"),
      (9, "tfx_bsl.public"),
      (10, "ml_metadata"),
      (14, "components.errors"),
      (15, "pipeline.cli"),
      (16, "models.tabular"),
    ]
  ]


def test_the_trainer_api_check_lets_models_import_only_the_api_module(tmp_path):
  source = _write_tree(
    tmp_path,
    {
      "components/distributed_trainer/__init__.py": "",
      "components/distributed_trainer/trainer_api.py": "",
      "components/distributed_trainer/strategy_lib.py": "",
      "components/report/__init__.py": "",
      "components/report/page.py": "",
      "models/tabular/runner.py": """\
        from components.distributed_trainer import trainer_api
        from components.distributed_trainer.trainer_api import default_strategy
        import components.distributed_trainer.trainer_api
        from components import model_contract

        def f():
          from components.distributed_trainer import strategy_lib
          from components.distributed_trainer import TrainResult
          import components.distributed_trainer.launch
          from components.report import page
          from components import report
      """,
    },
  )
  assert _model_imports(source) == [
    f"models/tabular/runner.py:{line} imports {name}"
    for line, name in [
      (7, "components.distributed_trainer.strategy_lib"),
      (8, "components.distributed_trainer"),
      (9, "components.distributed_trainer.launch"),
      (10, "components.report.page"),
      (11, "components.report"),
    ]
  ]
  # The API module is a parameter: another name makes the first three imports offend.
  assert len(_model_imports(source, api=f"{TRAINER}.other_api")) == 8
