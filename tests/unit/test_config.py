"""The pipeline's defaults stay in step with the components they configure."""

from components.optimizer import formats, run_config
from core import defaults
from pipeline.definition import config


def test_optimizer_variant_names_match_the_optimizer():
  # Every name the defaults list is a registered format's variant, and no format is unlisted.
  assert set(defaults.VARIANTS) == set(formats.names())
  assert set(defaults.DEFAULT_VARIANTS) < set(defaults.VARIANTS)
  assert config.PipelineConfig().optimizer_variants == run_config.OptimizerConfig().variants
  assert "qat" not in config.PipelineConfig().optimizer_variants


def test_defaults_point_at_the_bundled_example():
  c = config.PipelineConfig()
  assert c.module_file is None  # the bundled module, imported from the installed package
  assert (config.REPO_ROOT / "data" / "digits" / "digits.csv").exists()
  assert c.data_root == str(config.DEFAULT_DATA_ROOT)
  assert c.label_key == defaults.LABEL_KEY and c.task == "auto"
  assert c.min_eval_examples == defaults.MIN_EVAL_EXAMPLES
