"""Checks every flag, path and module before anything heavy runs (the data's checks are in
data_checks.py).

Nothing here imports TensorFlow: each mistake is reported in well under a second as one
`error:` line naming the fix (a ValueError subclass the runners print).
"""

from __future__ import annotations

import ast
import dataclasses
import os
import pathlib
import re
import tempfile
import uuid
from collections.abc import Sequence

from components import storage
from core import defaults
from core.errors import UserInputError


class CheckError(UserInputError):
  """A flag, path, module or data problem found before the run; the message names the fix."""


def control_characters(value: str) -> list[str]:
  """The control characters in a value, as escapes (newlines, tabs, escapes, line separators)."""
  import unicodedata

  found = [c for c in value if unicodedata.category(c) == "Cc" or c in "\u2028\u2029"]
  return sorted({repr(c)[1:-1] for c in found})


def check_text(flag: str, value: str | None) -> None:
  """Refuses a flag value holding control characters (they break logs, crontabs, requests)."""
  if value is None:
    return
  bad = control_characters(str(value))
  if bad:
    raise CheckError(f"{flag} contains control characters ({', '.join(bad)}); remove them.")


def check_fraction(flag: str, value: float) -> None:
  if not 0.0 <= value <= 1.0:
    raise CheckError(f"{flag} must be between 0 and 1, got {value:g}.")


def check_beam_args(flag: str, values: list[str]) -> None:
  """Beam options as Beam parses them: `--name=value` or `--name`, and no runner that is known
  to compute wrong results."""
  for value in values:
    check_text(flag, value)
    if not value.startswith("--") or value == "--":
      raise CheckError(
        f"{flag} {value!r} is not a Beam option; pass it as {flag}=--name=value, e.g. "
        f"{flag}=--runner=DataflowRunner."
      )
    if value.split("=", 1)[0] == "--runner" and "dask" in value.lower():
      raise CheckError(
        f"{flag} {value!r}: Beam's DaskRunner runs only the last branch of a pipeline here "
        "(stock CsvExampleGen on it wrote no train split); use the DirectRunner, Dataflow, "
        "Flink or Spark."
      )
  if values:
    _check_beam_parses(flag, values)


def _check_beam_parses(flag: str, values: list[str]) -> None:
  """The options as Beam's own parser reads them in each Beam component, which otherwise exits
  mid-run on one it cannot read (`--runner` without a value), its message only in the log."""
  import contextlib
  import io

  from apache_beam.options.pipeline_options import PipelineOptions

  said = io.StringIO()
  try:
    with contextlib.redirect_stderr(said):
      PipelineOptions(list(values)).get_all_options()
  except SystemExit:
    lines = said.getvalue().strip().splitlines() or ["it cannot be read"]
    reason = lines[-1].split("error: ", 1)[-1]
    raise CheckError(
      f"{flag} {' '.join(values)!r}: Beam cannot parse these options ({reason}); give each as "
      f"{flag}=--name=value, e.g. {flag}=--runner=DataflowRunner."
    ) from None


def check_at_least(flag: str, value: float, low: float) -> None:
  if not value >= low:  # NaN is not at least anything
    raise CheckError(f"{flag} must be at least {low:g}, got {value:g}.")


def check_local_cluster(workers: int, ps: int) -> None:
  """A local cluster's processes (workers, and with --local-ps a chief) fit this machine."""
  limit = defaults.max_local_processes()
  processes = defaults.local_cluster_processes(workers, ps)
  if processes > limit:
    raise CheckError(
      f"--local-workers {workers} and --local-ps {ps} would start {processes} processes "
      f"on this machine, over its {limit} (4 per CPU); pass fewer, or train across machines "
      "with run_kubeflow.py --workers N."
    )


def check_uri(flag: str, value: str | None) -> None:
  """An object-store URI names a bucket: gs://BUCKET/... or s3://BUCKET/..."""
  if not storage.is_remote(value):
    return
  scheme, _, rest = str(value).partition("://")
  if not rest.split("/", 1)[0]:
    raise CheckError(f"{flag} {value} names no bucket; pass {scheme}://BUCKET/PATH.")


# A container image reference as registries read it (distribution/reference's grammar):
# [host[:port]/]path[:tag][@digest], path components lower-case.
_HOST = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
  rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH_PART}(?:/{_PATH_PART})*"
  r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)


def check_image(flag: str, image: str) -> None:
  """A container image reference a registry accepts, e.g. gcr.io/PROJECT/tfx-pipeline-kit:1.0."""
  if not _IMAGE.fullmatch(image):
    raise CheckError(
      f"{flag} {image!r} is not a container image reference; pass REGISTRY/NAME:TAG in lower "
      "case, e.g. gcr.io/my-project/tfx-pipeline-kit:1.0."
    )


def check_output_file(flag: str, path: str) -> None:
  """A file to write: not a folder, in a folder that exists."""
  p = pathlib.Path(path)
  if p.is_dir():
    raise CheckError(f"{flag} {path} is a folder; pass a file name, e.g. {p / 'pipeline.json'}.")
  if not p.parent.resolve().is_dir():
    raise CheckError(f"{flag} {path}: folder {p.parent} does not exist; create it first.")


def check_schema_file(flag: str, path: str) -> None:
  """A --schema file parses as a TFMD Schema in text format, as SchemaGen writes it."""
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2

  try:
    with open(path, encoding="utf-8") as f:
      text_format.Parse(f.read(), schema_pb2.Schema())
  except (text_format.ParseError, UnicodeDecodeError) as e:
    detail = " ".join(str(e).split()).rstrip(".")
    raise CheckError(
      f"{flag} {path} is not a Schema in text format ({detail}); pass the schema.pbtxt "
      "that SchemaGen wrote, or leave --schema out."
    ) from None


def check_module_folder(flag: str, path: str) -> None:
  """TFX packages every *.py file beside a module into a wheel: each must be a file."""
  folder = pathlib.Path(path).parent
  odd = sorted(p.name for p in folder.glob("*.py") if not p.is_file())
  if odd:
    raise CheckError(
      f"{flag} {path}: its folder also holds {odd[0]!r}, which is not a file, and TFX packages "
      "every *.py beside the module; rename it or move the module to a folder of its own."
    )


def check_folder(flag: str, path: str, *, must_exist: bool) -> None:
  """A local folder flag: not a file, and (when it must exist) there."""
  p = pathlib.Path(path)
  if p.exists() and not p.is_dir():
    if p.suffix.lower() == ".csv":
      raise CheckError(
        f"{flag} {path} is a CSV file, not a folder; pass the folder that holds it "
        f"({p.parent}): the run reads every CSV file in it."
      )
    raise CheckError(f"{flag} {path} is a file, not a folder; pass a folder.")
  if must_exist and not p.exists():
    raise CheckError(f"{flag} {path} does not exist; pass an existing folder.")


def check_writable(flag: str, path: str) -> None:
  """Tries a write in the folder (or its nearest existing parent), as the run will.

  Raises:
    CheckError: when the folder (or a parent) is a file, or a test file cannot be written.
  """
  p = pathlib.Path(path)
  for parent in [p, *p.parents]:
    if parent.exists():
      break
  if not parent.is_dir():
    raise CheckError(f"{flag} {path}: {parent} is a file, not a folder; pass a folder.")
  try:
    fd, probe = tempfile.mkstemp(prefix=f".write-check-{uuid.uuid4().hex[:6]}-", dir=parent)
    os.close(fd)
    os.unlink(probe)
  except OSError as e:
    reason = e.strerror or str(e)
    raise CheckError(
      f"{flag} {path} cannot be written ({reason} in {parent}); pass a folder you can write."
    ) from None


def check_serving_writable(flag: str, serving_dir: str, model_name: str) -> None:
  """The local serving folder and, where it exists, its model's folder can be written: the
  Pusher publishes each version, takes its lock and appends the history and the nights log in
  the model's folder (an object store's is not checked).

  Args:
    flag: the flag that named the serving folder (or would have: its default is
      <output-dir>/serving).
    serving_dir: the serving folder.
    model_name: the model, whose folder is `<serving_dir>/<model_name>`.

  Raises:
    CheckError: naming the folder that cannot be written and the fix.
  """
  if storage.is_remote(serving_dir):
    return
  check_writable(flag, serving_dir)
  folder = pathlib.Path(serving_dir) / model_name
  if not folder.is_dir():
    return
  try:
    fd, probe = tempfile.mkstemp(prefix=f".write-check-{uuid.uuid4().hex[:6]}-", dir=folder)
    os.close(fd)
    os.unlink(probe)
  except OSError as e:
    raise CheckError(
      f"the model folder {folder} under {flag} cannot be written ({e.strerror or e}); the "
      "Pusher publishes each version there: run as a user who can write that folder, remount "
      "it read-write, or pass another --serving-dir."
    ) from None


def module_functions(path: str) -> set[str]:
  """Names of the top-level functions a module file defines (read, not imported).

  Raises:
    CheckError: when the file is missing, not a file, or not valid Python.
  """
  tree = _module_tree(path)
  names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
  # `run_fn = some_helper(...)` style assignments count too.
  for node in tree.body:
    if isinstance(node, ast.Assign):
      names.update(t.id for t in node.targets if isinstance(t, ast.Name))
  return names


def _module_tree(path: str) -> ast.Module:
  """A module file's syntax tree (read, not imported).

  Raises:
    CheckError: when the file is missing, not a file, or not valid Python.
  """
  p = pathlib.Path(path)
  if not p.exists():
    raise CheckError(f"module file {path} does not exist; pass a Python module file.")
  if not p.is_file():
    raise CheckError(f"module file {path} is not a file; pass a Python module file.")
  try:
    return ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
  except (SyntaxError, UnicodeDecodeError) as e:
    line = getattr(e, "lineno", None)
    where = f" (line {line})" if line else ""
    raise CheckError(f"module file {path} is not valid Python{where}: {e}; fix it.") from None


def check_module_imports(flag: str, path: str) -> None:
  """Refuses a module file whose top-level imports name a package this environment lacks, before
  the run: the import failed in the trainer, after the data steps had run (TFX's
  penguin_utils_tfdf_experimental.py needs tensorflow_decision_forests). Imports inside a `try`,
  an `if` or a function are the module's own affair, and a name beside the file is its sibling.

  Raises:
    CheckError: naming the import, its line and the fix.
  """
  import importlib.util

  module = pathlib.Path(path)
  for node in _module_tree(path).body:
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
      names = [node.module]
    else:
      continue
    for name in names:
      top = name.split(".")[0]
      sibling = (module.parent / f"{top}.py").exists() or (module.parent / top).is_dir()
      if not sibling and importlib.util.find_spec(top) is None:
        raise CheckError(
          f"{flag} {path} imports {name!r} (line {node.lineno}), which is not installed here; "
          "install the package that provides it into this environment, or remove the import."
        )


@dataclasses.dataclass(frozen=True)
class ModulePlan:
  """Which stock components a module file asks for.

  Attributes:
    transform: a Transform runs (preprocessing_fn in the module or the transform module).
    tune: a Tuner runs (--tune, with tuner_fn in the module).
    style: who builds the model: 'default' (the bundled module), 'build_model' (the default
      model around the module's network) or 'run_fn' (the module itself).
  """

  transform: bool
  tune: bool
  style: str = defaults.RUN_FN


def plan_modules(
  module_file: str | None, transform_module: str | None, tune: bool, local: bool = True
) -> ModulePlan:
  """Checks the module files against the flags and decides Transform and Tuner.

  Args:
    module_file: the trainer module, or None for the bundled default module.
    transform_module: a separate file with preprocessing_fn, or None.
    tune: whether --tune was given.
    local: whether the files are on this machine (they cannot be read otherwise).

  Raises:
    CheckError: naming the missing function and the flag to change.
  """
  if module_file is None:
    functions = {defaults.RUN_FN, defaults.TUNER_FN}
  elif local and not storage.is_remote(module_file):
    functions = module_functions(module_file)
    check_module_folder("--module-file", module_file)
    if defaults.RUN_FN not in functions and defaults.BUILD_MODEL_FN not in functions:
      raise CheckError(
        f"module file {module_file} defines neither run_fn(fn_args) nor build_model(hparams); "
        "add one of them."
      )
  else:
    functions = {defaults.RUN_FN}
  transform = defaults.PREPROCESSING_FN in functions
  if transform_module:
    local_file = local and not storage.is_remote(transform_module)
    if local_file:
      check_module_folder("--transform-module", transform_module)
    if local_file and defaults.PREPROCESSING_FN not in module_functions(transform_module):
      raise CheckError(
        f"--transform-module {transform_module} defines no preprocessing_fn(inputs); add it."
      )
    transform = True
  if transform and (module_file is None or defaults.RUN_FN not in functions):
    # The default model (bundled, or around a build_model network) reads the raw columns and
    # preprocesses them inside the network; it read the penguin template's transformed examples
    # by the raw label's name and stopped with a false "one value only".
    raise CheckError(
      "a Transform's output reaches only a run_fn that reads it (fn_args.transform_output), and "
      "the default model preprocesses the raw columns itself; leave out --transform-module (and "
      "preprocessing_fn), or pass --module-file with such a run_fn."
    )
  if tune and defaults.TUNER_FN not in functions:
    raise CheckError(
      f"--tune needs a tuner_fn(fn_args) in {module_file}; add one or leave out --tune."
    )
  if module_file is None:
    style = "default"
  elif defaults.RUN_FN not in functions:
    style = defaults.BUILD_MODEL_FN
  else:
    style = defaults.RUN_FN
  return ModulePlan(transform=transform, tune=tune, style=style)


def check_excluded_columns(exclude_columns: Sequence[str], label_key: str) -> None:
  """Refuses --exclude-columns naming the label: the label is never a feature anyway.

  Raises:
    CheckError: naming the label and the fix.
  """
  if label_key in exclude_columns:
    raise CheckError(
      f"--exclude-columns names the label {label_key!r}, which is never a feature (the model "
      "learns to predict it, not from it); leave it out of --exclude-columns."
    )
