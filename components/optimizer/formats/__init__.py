"""Registry of the Optimizer's formats: one module per conversion target, loaded on first use."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
  from components.optimizer.formats.variant_base import Variant

# One line per format: the module that defines its variants and registers them with `register`.
# A format imports its back-end packages through `backend` when a variant runs, so listing one
# here costs nothing on a host without them.
FORMAT_MODULES = [
  "components.optimizer.formats.savedmodel_pruning",
  "components.optimizer.formats.tflite",
  "components.optimizer.formats.onnx",
  "components.optimizer.formats.tensorrt",
]

# Variant name -> class, filled as the format modules are imported.
VARIANTS: dict[str, type[Variant]] = {}


class BackendMissingError(ImportError):
  """A format's back-end package is not installed; the message says what to install."""


def register(cls: type[Variant]) -> type[Variant]:
  """Class decorator adding a variant to the registry under its `name`.

  Args:
    cls: a Variant subclass with a unique `name`.

  Returns:
    `cls`, unchanged.
  """
  VARIANTS[cls.name] = cls
  return cls


def _load() -> None:
  # import_module is a dictionary look-up for a module already imported.
  for module in FORMAT_MODULES:
    importlib.import_module(module)


def names() -> list[str]:
  """Every registered variant's name, sorted.

  Returns:
    The names the registered formats define.
  """
  _load()
  return sorted(VARIANTS)


def create(name: str) -> Variant:
  """Instantiates a registered variant by name.

  Args:
    name: the variant's name.

  Returns:
    A new instance of its class.

  Raises:
    ValueError: for a name that is not registered.
  """
  _load()
  if name not in VARIANTS:
    raise ValueError(f"Unknown optimizer variant {name!r}; choose from {sorted(VARIANTS)}.")
  return VARIANTS[name]()


def backend(module: str, install: str) -> ModuleType:
  """Imports a format's back-end package, saying what to install when it is missing.

  Args:
    module: the module to import (`tensorrt`, `pycuda.driver`).
    install: what to pass to pip to get it.

  Returns:
    The imported module.

  Raises:
    BackendMissingError: when it cannot be imported.
  """
  try:
    return importlib.import_module(module)
  except ImportError as error:
    package = module.split(".", maxsplit=1)[0]
    missing = (error.name or "").split(".", maxsplit=1)[0]
    if isinstance(error, ModuleNotFoundError) and missing == package:
      raise BackendMissingError(f"{package} not installed: pip install {install}") from error
    # Installed but broken (a native library missing): the import's own words say which.
    raise BackendMissingError(
      f"{package} does not import ({error}); reinstall it: pip install {install}"
    ) from error
