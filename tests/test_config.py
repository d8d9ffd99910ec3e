"""The pipeline's defaults stay in step with the components they configure."""

from components.optimizer import optimizer_lib
from pipeline import config


def test_optimizer_variant_names_match_the_optimizer():
  assert set(config.OPTIMIZER_VARIANTS) == set(optimizer_lib.VARIANT_ORDER)
  assert set(config.DEFAULT_OPTIMIZER_VARIANTS) == set(optimizer_lib.DEFAULT_VARIANTS)


def test_defaults_point_at_the_bundled_example():
  c = config.PipelineConfig()
  assert c.module_file is None  # the bundled module, imported from the installed package
  assert (config.REPO_ROOT / "data" / "digits" / "digits.csv").exists()
  assert c.data_root == str(config.DEFAULT_DATA_ROOT)
