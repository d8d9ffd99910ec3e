"""live_model_lib.live_model_key: the key LiveModel is cached by, on both orchestrators."""

import json

from components.live_model import live_model_lib
from components.serving import live


def _publish(serving, version, **fields):
  folder = serving / "digits" / str(version)
  folder.mkdir(parents=True)
  (folder / "manifest.json").write_text(json.dumps({"version": version, **fields}))
  (folder / "saved_model.pb").write_bytes(b"")
  return live_model_lib.live_key(live.live_version(str(serving), "digits"))


def _key(serving, pipeline="digits"):
  return live_model_lib.live_model_key(str(serving), "digits", pipeline)


def test_nothing_live_names_the_pipeline_and_none(tmp_path):
  assert json.loads(_key(tmp_path / "serving")) == {"pipeline": "digits", "live": "none"}
  assert _key(tmp_path / "serving") != _key(tmp_path / "serving", "other")


def test_a_version_pushed_by_this_pipeline_keeps_the_key_its_run_had(tmp_path):
  serving = tmp_path / "serving"
  first = _key(serving)
  own = _publish(serving, 1, live_key=first)
  assert own.startswith("1:")
  assert _key(serving) == first


def test_other_pipelines_rollbacks_and_unrecorded_keys_get_the_live_versions_own_key(tmp_path):
  recorded = json.dumps({"pipeline": "digits", "live": "none"}, sort_keys=True)
  cases = {
    "other-pipeline": {"live_key": json.dumps({"pipeline": "other", "live": "none"})},
    "rollback": {"live_key": recorded, "rollback": {"from": 2, "to": 1}},
    "no-key": {},
    "not-json": {"live_key": "none"},
    "not-an-object": {"live_key": "[1]"},
  }
  for name, fields in cases.items():
    serving = tmp_path / name
    own = _publish(serving, 3, **fields)
    assert json.loads(_key(serving)) == {"pipeline": "digits", "live": own}, name


def test_the_key_changes_with_the_live_version_and_its_manifest(tmp_path):
  serving = tmp_path / "serving"
  first = _publish(serving, 1)
  second = _publish(serving, 2)
  assert first != second and second.startswith("2:")
  (serving / "digits" / "2" / "manifest.json").write_text(json.dumps({"version": 2, "x": 1}))
  current = live.live_version(str(serving), "digits")
  assert live_model_lib.live_key(current) not in (first, second)
  assert json.loads(_key(serving))["live"] == live_model_lib.live_key(current)


def test_a_rerun_with_other_settings_compares_with_the_live_version(tmp_path):
  # The run that pushed version 1 had nothing live. A rerun with other settings (two training
  # steps instead of 600) reused that key: LiveModel stayed cached with "nothing was live", and
  # its far worse model was blessed without a comparison and pushed over version 1.
  serving = tmp_path / "serving"
  first = live_model_lib.live_model_key(str(serving), "digits", "digits", settings="600-steps")
  assert json.loads(first) == {"pipeline": "digits", "live": "none", "settings": "600-steps"}
  own = _publish(serving, 1, live_key=first)
  same = live_model_lib.live_model_key(str(serving), "digits", "digits", settings="600-steps")
  other = live_model_lib.live_model_key(str(serving), "digits", "digits", settings="2-steps")
  assert same == first
  assert json.loads(other) == {"pipeline": "digits", "live": own, "settings": "2-steps"}


def test_the_settings_fingerprint_follows_the_settings_and_the_module_files_contents(tmp_path):
  import dataclasses

  from pipeline.definition.config import PipelineConfig

  module = tmp_path / "module.py"
  module.write_text("def run_fn(fn_args):\n  pass\n")
  config = PipelineConfig(module_file=str(module), train_steps=600)
  assert (
    config.settings_fingerprint()
    == PipelineConfig(module_file=str(module), train_steps=600).settings_fingerprint()
  )
  fewer = dataclasses.replace(config, train_steps=2)
  assert fewer.settings_fingerprint() != config.settings_fingerprint()
  before = config.settings_fingerprint()
  module.write_text("def run_fn(fn_args):\n  return None\n")
  assert config.settings_fingerprint() != before
