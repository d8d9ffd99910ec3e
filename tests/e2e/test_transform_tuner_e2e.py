"""A module in the style of TFX's penguin example whose preprocessing_fn fails, end to end.

What a user reads when their preprocessing_fn raises inside the stock Transform: its traceback,
then one line naming the function and the module file. The module's Transform, Tuner, training,
optimization and push go through the executors in
`tests/component/test_transform_tuner_module.py`; a rerun with a Transform and a Tuner served
from the cache is `tests/e2e/test_stock_modules_e2e.py`'s.
"""

from __future__ import annotations

import pytest

from tests.support import tabular_data
from tests.support.cli_runs import run_script

pytestmark = pytest.mark.e2e


BROKEN_PREPROCESSING = """
import tensorflow_transform as tft


def preprocessing_fn(inputs):
  return {"petal_xf": tft.scale_to_z_score(inputs["petal_size"])}


def run_fn(fn_args):
  raise AssertionError("never reached: Transform fails first")
"""


@pytest.mark.timeout(900)
def test_a_failing_preprocessing_fn_keeps_its_traceback_and_names_the_function(tmp_path):
  data = tmp_path / "data"
  tabular_data.write_iris_csv(data)
  module = tmp_path / "broken_module.py"
  module.write_text(BROKEN_PREPROCESSING)
  proc = run_script(
    "run_local.py",
    "--data-root", data, "--output-dir", tmp_path / "out", "--module-file", module,
    "--label-key", "species", "--eval-label-key", "species_xf", "--task", "multiclass",
    "--min-eval-examples", "20", "--quiet",
    timeout=800, warm=True,
  )  # fmt: skip
  assert proc.returncode == 1, proc.stderr[-3000:]
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert lines[-1] == (
    f"error: preprocessing_fn in {module} raised KeyError: 'petal_size'; the traceback above "
    "points into that function."
  )
  assert "Traceback (most recent call last)" in proc.stderr
  assert 'inputs["petal_size"]' in proc.stderr  # the user's own line, in the traceback
  assert not (tmp_path / "out" / "serving").exists()
