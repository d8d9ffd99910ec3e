"""pipeline.cli's checks that reach into TensorFlow, Beam or TFX: the Beam args, the label the
Evaluator reads, the ExampleGen's lenient columns. The rest: tests/fast/test_cli_checks.py."""

import argparse

import pytest

from pipeline.cli import checks, flags, resolve
from tests.support.cli_runs import REPO_ROOT


def test_beam_args_are_options_and_never_the_dask_runner():
  checks.check_beam_args(
    "--beam-arg", ["--runner=DataflowRunner", "--project=p", "--save_main_session"]
  )
  with pytest.raises(checks.CheckError, match=r"'runner=DataflowRunner' is not a Beam option"):
    checks.check_beam_args("--beam-arg", ["runner=DataflowRunner"])
  with pytest.raises(checks.CheckError, match="DaskRunner runs only the last branch"):
    checks.check_beam_args("--beam-arg", ["--runner=DaskRunner"])
  # What Beam's own parser refuses is refused before the run, not by each Beam component.
  with pytest.raises(checks.CheckError, match=r"argument --runner: expected one argument"):
    checks.check_beam_args("--beam-arg", ["--runner"])
  with pytest.raises(checks.CheckError, match=r"--direct_num_workers: invalid int value: 'x'"):
    checks.check_beam_args("--beam-arg", ["--direct_num_workers=x"])


def _args(tmp_path, *argv):
  parser = argparse.ArgumentParser()
  flags.add_pipeline_args(parser)
  return parser.parse_args([str(a) for a in argv])


@pytest.mark.parametrize(
  ("module", "network", "through_model"),
  [
    (None, False, True),
    ("network_module.py", True, True),
    ("simple_keras_module.py", False, False),
  ],
)
def test_the_evaluator_reads_the_label_through_the_default_models_signature(
  tmp_path, module, network, through_model
):
  # A build_model module's model is the default model's: a text label reaches TFMA as the
  # class index its transform_features signature gives, as for the bundled module. A run_fn
  # module's label is read as the examples hold it, so it is a number here (a text one is
  # refused before the run: test_cli_checks).
  data = tmp_path / "data"
  data.mkdir()
  labels = "01" if module == "simple_keras_module.py" else "ab"
  (data / "d.csv").write_text("x,kind\n" + "".join(f"{i},{labels[i % 2]}\n" for i in range(300)))
  flags = ["--data-root", data, "--label-key", "kind"]
  if module:
    flags += ["--module-file", REPO_ROOT / "tests" / "data" / "modules" / module]
  config = resolve.config_from_args(
    _args(tmp_path, *flags), str(tmp_path / "root"), str(tmp_path / "serving")
  )
  assert config.network_module is network
  from pipeline.definition import factory  # TFX: imported by this test alone

  assert factory.label_through_model(config) is through_model


def test_the_example_gen_is_lenient_in_exactly_the_columns_left_out(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  (data / "d.csv").write_text(
    "x,id,note,label\n" + "".join(f"{i},{i},n{i},{i % 2}\n" for i in range(300))
  )
  from pipeline.definition import factory, nodes  # TFX: imported by this test alone

  for excluded, lenient in (([], None), (["id,note"], '["id", "note"]')):
    flags = ["--data-root", data, *(["--exclude-columns", *excluded] if excluded else [])]
    config = resolve.config_from_args(
      _args(tmp_path, *flags), str(tmp_path / "root"), str(tmp_path / "serving")
    )
    pipeline = factory.create_pipeline(config)
    [example_gen] = [c for c in pipeline.components if c.id == nodes.CSV_EXAMPLE_GEN]
    assert example_gen.exec_properties.get("lenient_columns") == lenient


def test_a_count_label_reaches_the_trainer_and_the_evaluator_with_both_readings(tmp_path):
  # AER's DoctorVisits-like counts 0..9: the trainer is told to read them both ways, and the
  # Evaluator gets the quantity's config (mean squared error under the whole input's ceiling).
  data = tmp_path / "data"
  data.mkdir()
  (data / "d.csv").write_text("x,visits\n" + "".join(f"{i},{i % 10}\n" for i in range(300)))
  import tensorflow_model_analysis as tfma
  from google.protobuf import json_format

  from core import properties
  from pipeline.definition import factory, nodes  # TFX: imported by this test alone

  def built(*extra):
    flags = ["--data-root", data, "--label-key", "visits", *extra]
    config = resolve.config_from_args(
      _args(tmp_path, *flags), str(tmp_path / "root"), str(tmp_path / "serving")
    )
    components = {c.id: c for c in factory.create_pipeline(config).components}
    return config, components[nodes.TRAINER], components[nodes.EVALUATOR]

  config, trainer, evaluator = built()
  assert (config.task, config.count_readings) == ("multiclass", True)
  custom = trainer.exec_properties["custom_config"]
  assert '"count_readings": true' in str(custom)
  quantity = json_format.Parse(evaluator.exec_properties["quantity_eval_config"], tfma.EvalConfig())
  metrics = [m.class_name for s in quantity.metrics_specs for m in s.metrics]
  assert metrics == ["MeanSquaredError", "MeanAbsoluteError", "ExampleCount"]
  ceiling = quantity.metrics_specs[0].metrics[0].threshold.value_threshold.upper_bound.value
  assert ceiling == pytest.approx(config.quantity_max_mse) and ceiling > 0
  assert "SparseCategoricalAccuracy" in evaluator.exec_properties["eval_config"]
  # --task multiclass, or a run_fn module of one's own: one reading, no quantity config.
  module = REPO_ROOT / "tests" / "data" / "modules" / "simple_keras_module.py"
  for extra in (("--task", "multiclass"), ("--module-file", module)):
    config, trainer, evaluator = built(*extra)
    assert not config.count_readings and config.task == "multiclass"
    assert evaluator.exec_properties.get("quantity_eval_config") is None
    assert properties.READINGS_CONFIG not in str(trainer.exec_properties["custom_config"])
