"""The serving package on a local folder: push, retention, rollback, inventory and validation."""

import json
import os
import pathlib
import shutil

import pytest

from components.serving import (
  history,
  live,
  manifest,
  paths,
  publish,
  rollback,
  store,
  versions,
)


def _fake_saved_model(root: pathlib.Path, payload: str) -> str:
  """Writes a folder shaped like a SavedModel; the serving package never parses the protobuf."""
  root.mkdir(parents=True)
  (root / "saved_model.pb").write_bytes(b"pb:" + payload.encode())
  (root / "variables").mkdir()
  (root / "variables" / "variables.index").write_bytes(b"index:" + payload.encode())
  (root / "variables" / "variables.data-00000-of-00001").write_bytes(os.urandom(4096))
  (root / "assets").mkdir()
  return str(root)


def _push(tmp_path, serving, payload, **kwargs):
  src = _fake_saved_model(tmp_path / f"src-{payload}", payload)
  return publish.push_version(str(serving), "digits", src, **kwargs)


def test_push_publishes_numbered_version_with_verifiable_manifest(tmp_path):
  serving = tmp_path / "serving"
  tflite = tmp_path / "opt" / "tflite_int8"
  tflite.mkdir(parents=True)
  (tflite / "model.tflite").write_bytes(b"tflite-bytes")
  onnx_file = tmp_path / "opt" / "model.onnx"
  onnx_file.write_bytes(b"onnx-bytes")

  result = _push(
    tmp_path,
    serving,
    "a",
    variants={"tflite_int8": str(tflite), "onnx": str(onnx_file)},
    variant_metrics={"tflite_int8": {"accuracy": 0.93, "size_bytes": 12}},
    manifest_extra={"data_spans": [3], "lineage": {"execution_id": 7}},
  )

  assert result.pushed and result.version == 1 and result.live_version == 1
  version_dir = serving / "digits" / "1"
  assert result.path == str(version_dir)
  assert (version_dir / "saved_model.pb").read_bytes() == b"pb:a"
  assert (version_dir / "variables" / "variables.index").is_file()
  assert (version_dir / "assets").is_dir()  # Empty folders of the SavedModel survive.
  variant_file = version_dir / "assets.extra" / "variants" / "tflite_int8" / "model.tflite"
  assert variant_file.read_bytes() == b"tflite-bytes"
  assert (version_dir / "assets.extra" / "variants" / "onnx" / "model.onnx").is_file()
  written = json.loads((version_dir / "manifest.json").read_text())
  assert written["version"] == 1
  assert written["model_name"] == "digits"
  assert written["event"] == "push"
  assert written["created_at"].endswith("Z")
  assert written["data_spans"] == [3]
  assert written["lineage"] == {"execution_id": 7}
  assert written["variants"]["tflite_int8"]["metrics"] == {"accuracy": 0.93, "size_bytes": 12}
  assert written["variants"]["onnx"]["metrics"] == {}
  assert set(written["files"]) == {
    "saved_model.pb",
    "variables/variables.index",
    "variables/variables.data-00000-of-00001",
    "assets.extra/variants/tflite_int8/model.tflite",
    "assets.extra/variants/onnx/model.onnx",
  }
  assert versions.verify_version(str(version_dir)) == []
  # TF Serving sees exactly one version folder; nothing else in the model dir is all-digit.
  assert [p.name for p in (serving / "digits").iterdir() if p.name.isdigit()] == ["1"]
  assert not [p for p in (serving / "digits").iterdir() if p.name.startswith(".staging-")]
  entries = history.read_history(str(serving), "digits")
  assert [(h["event"], h["version"]) for h in entries] == [("push", 1)]


def test_verify_detects_tampering_and_unlisted_files(tmp_path):
  serving = tmp_path / "serving"
  result = _push(tmp_path, serving, "a")
  version_dir = pathlib.Path(result.path)
  (version_dir / "variables" / "variables.index").write_bytes(b"tampered")
  (version_dir / "stray.txt").write_text("x")
  problems = versions.verify_version(str(version_dir))
  assert any("variables/variables.index has sha256" in p for p in problems)
  assert any("stray.txt is not listed" in p for p in problems)
  (version_dir / "manifest.json").unlink()
  assert any("manifest.json is missing" in p for p in versions.verify_version(str(version_dir)))


def test_a_damaged_live_version_stops_the_run_before_it_starts_in_one_line(tmp_path):
  """saved_model.pb damaged on disk: the nights that compared with it died in a TensorFlow
  traceback (the DataGate, the Evaluator), and nights with nothing new reported all was well."""
  from components.live_model import live_model_lib

  serving = tmp_path / "serving"
  _push(tmp_path, serving, "a")
  result = _push(tmp_path, serving, "b")
  version_dir = pathlib.Path(result.path)
  (version_dir / "assets.extra").mkdir()
  (version_dir / "assets.extra" / "tf_serving_warmup_requests").write_bytes(b"warm")
  current = live.live_version(str(serving), "digits")
  live.check_intact(current, "digits")  # A file added beside the listed ones is no fault.
  (version_dir / "saved_model.pb").write_bytes(b"garbage")

  with pytest.raises(paths.PusherError) as raised:
    live_model_lib.live_model_key(str(serving), "digits", "digits")

  assert str(raised.value).startswith("live version 2 of 'digits' is damaged (saved_model.pb has")
  assert str(raised.value).endswith(
    "move back to an intact version with pipeline/rollback.py --previous (--list shows each "
    "version's state), then run again."
  )
  assert live_model_lib.live_model_key(str(serving), "digits", "digits", verify=False)


def test_versions_increase_and_identical_content_is_not_pushed_again(tmp_path):
  serving = tmp_path / "serving"
  first = _push(tmp_path, serving, "a")
  second = _push(tmp_path, serving, "b")
  assert (first.version, second.version) == (1, 2)
  # Same files as the live version (a cached Trainer rerun): nothing new is pushed.
  src_b = str(tmp_path / "src-b")
  again = publish.push_version(str(serving), "digits", src_b)
  assert not again.pushed
  assert again.version is None
  assert "identical to live version 2" in again.reason
  assert again.live_version == 2
  assert versions.list_versions(str(serving), "digits") == [1, 2]
  forced = publish.push_version(str(serving), "digits", src_b, skip_if_identical=False)
  assert forced.pushed and forced.version == 3


def test_a_version_that_went_live_after_the_evaluation_is_not_replaced_unchecked(tmp_path):
  # Two runs beside each other share a serving folder; both compared their models with
  # version 1. The first pushes version 2; the second was never compared with it.
  serving = tmp_path / "serving"
  assert _push(tmp_path, serving, "a").version == 1
  assert _push(tmp_path, serving, "b", evaluated_while_live=1).version == 2
  late = _push(tmp_path, serving, "c", evaluated_while_live=1)
  assert not late.pushed and late.live_version == 2
  assert late.reason == (
    "version 2 went live during this run, which compared the model with what was live when it "
    "began (version 1); the next run compares with version 2"
  )
  assert [n for n in sorted(os.listdir(serving / "digits")) if n.isdigit()] == ["1", "2"]
  # A first run (nothing live when it began) beside another first run that pushed.
  first = _push(tmp_path, tmp_path / "other", "d")
  assert first.version == 1
  refused = publish.push_version(
    str(tmp_path / "other"), "digits", _fake_saved_model(tmp_path / "e", "e"),
    evaluated_while_live=0,
  )  # fmt: skip
  assert not refused.pushed and "(nothing)" in refused.reason
  # The version it was compared with is still live: pushed, as without the check.
  assert _push(tmp_path, serving, "f", evaluated_while_live=2).version == 3


def test_the_live_version_is_the_highest_complete_one(tmp_path):
  serving = tmp_path / "serving"
  assert live.live_version(str(serving), "digits") is None
  _push(tmp_path, serving, "a")
  (serving / "digits" / "2" / "variables").mkdir(parents=True)  # No manifest: not complete.
  current = live.live_version(str(serving), "digits")
  assert (current.version, current.path) == (1, str(serving / "digits" / "1"))
  assert current.manifest == manifest.read_manifest(current.path)
  rows = versions.describe_versions(str(serving), "digits")
  assert [(r["version"], r["live"]) for r in rows] == [(1, True), (2, False)]
  assert rows[1]["problems"]
  # A push takes a number above every folder, and records what was live before it.
  assert _push(tmp_path, serving, "b").version == 3
  assert live.live_version(str(serving), "digits").version == 3
  assert history.read_history(str(serving), "digits")[-1]["previous_live"] == 1
  (serving / "digits" / "3" / "manifest.json").write_text("{")  # Unreadable: not complete.
  assert live.live_version(str(serving), "digits").version == 1
  with pytest.raises(paths.PusherError, match="already live"):
    rollback.rollback(str(serving), "digits", to_version=1)


def test_version_numbers_are_never_reused_after_manual_delete(tmp_path):
  serving = tmp_path / "serving"
  _push(tmp_path, serving, "a")
  _push(tmp_path, serving, "b")
  # An operator deletes the newest version by hand; the history still remembers 2.
  shutil.rmtree(serving / "digits" / "2")
  assert _push(tmp_path, serving, "c").version == 3


def _prune(serving, keep_versions):
  """Retention on its own, outside a push: what a push does after publishing (publish.retire)."""
  with store.LocalFolder(paths.model_dir(str(serving), "digits")) as folder:
    current = live.live_in(folder)
    return publish.retire(folder, keep_versions, current.version if current else None)


def test_retention_keeps_newest_and_never_the_live_version(tmp_path):
  serving = tmp_path / "serving"
  removed = []
  for i in range(5):
    result = _push(tmp_path, serving, f"m{i}", keep_versions=2)
    removed.extend(result.removed_versions)
  assert versions.list_versions(str(serving), "digits") == [4, 5]
  assert removed == [1, 2, 3]
  assert live.live_version(str(serving), "digits").version == 5
  # keep_versions=1 still keeps the live version.
  assert _prune(serving, 1) == [4]
  assert versions.list_versions(str(serving), "digits") == [5]
  assert _prune(serving, 1) == []
  assert versions.list_versions(str(serving), "digits") == [5]
  prunes = [h for h in history.read_history(str(serving), "digits") if h["event"] == "prune"]
  assert [p["versions"] for p in prunes] == [[1], [2], [3], [4]]
  assert not [p for p in (serving / "digits").iterdir() if p.name.startswith(".trash-")]


def test_retention_after_rollback_keeps_the_republished_live_version(tmp_path):
  serving = tmp_path / "serving"
  for i in range(3):
    _push(tmp_path, serving, f"m{i}", keep_versions=3)
  result = rollback.rollback(str(serving), "digits", to_version=1, keep_versions=2)
  assert result.version == 4
  assert result.removed_versions == (1, 2)
  assert versions.list_versions(str(serving), "digits") == [3, 4]
  assert (serving / "digits" / "4" / "saved_model.pb").read_bytes() == b"pb:m0"


@pytest.mark.parametrize("keep", [0, -1, "3", 2.0, True])
def test_keep_versions_must_be_positive_int(tmp_path, keep):
  with pytest.raises(paths.PusherError, match="keep_versions must be an integer >= 1"):
    _push(tmp_path, tmp_path / "serving", "a", keep_versions=keep)


def test_rollback_to_republishes_old_version_as_new_highest(tmp_path):
  serving = tmp_path / "serving"
  _push(tmp_path, serving, "good", manifest_extra={"data_spans": [1]})
  _push(tmp_path, serving, "bad", manifest_extra={"data_spans": [2]})
  result = rollback.rollback(str(serving), "digits", to_version="1", reason="bad accuracy")
  assert result.version == 3
  assert live.live_version(str(serving), "digits").version == 3
  v3 = serving / "digits" / "3"
  assert (v3 / "saved_model.pb").read_bytes() == b"pb:good"
  assert versions.verify_version(str(v3)) == []
  written = manifest.read_manifest(str(v3))
  assert written["event"] == "rollback"
  assert written["version"] == 3
  assert written["republished_from"]["version"] == 1
  assert written["rollback"] == {"from": 2, "to": 1, "reason": "bad accuracy"}
  assert written["data_spans"] == [1]  # Provenance of the restored model is kept.
  last = history.read_history(str(serving), "digits")[-1]
  assert last["event"] == "rollback"
  assert (last["from"], last["to"], last["version"], last["reason"]) == (2, 1, 3, "bad accuracy")
  assert last["time"].endswith("Z")


def test_nightly_rerun_does_not_undo_a_rollback(tmp_path):
  serving = tmp_path / "serving"
  _push(tmp_path, serving, "good")
  _push(tmp_path, serving, "bad")
  rollback.rollback(str(serving), "digits", previous=True, reason="regression")
  again = publish.push_version(str(serving), "digits", str(tmp_path / "src-bad"))
  assert not again.pushed
  assert "rolled back" in again.reason
  assert live.live_version(str(serving), "digits").version == 3
  # A genuinely new model still goes out.
  assert _push(tmp_path, serving, "fixed").version == 4


def test_rollback_previous_walks_back_past_rejected_content(tmp_path):
  serving = tmp_path / "serving"
  for name in ("v1", "v2", "v3"):
    _push(tmp_path, serving, name)
  first = rollback.rollback(str(serving), "digits", previous=True)
  assert first.manifest["republished_from"]["version"] == 2
  # Live is now 4 (= v2's content). The previous one is v1: 3 was rolled back from, 2 is live.
  second = rollback.rollback(str(serving), "digits", previous=True)
  assert second.manifest["republished_from"]["version"] == 1
  assert (serving / "digits" / "5" / "saved_model.pb").read_bytes() == b"pb:v1"
  with pytest.raises(paths.PusherError) as raised:
    rollback.rollback(str(serving), "digits", previous=True)
  # It said no earlier version differed, though 2, 3 and 4 do: rollbacks moved away from them.
  assert str(raised.value) == (
    "No earlier version of 'digits' differs from live version 5 but those a rollback moved away "
    "from (2, 3, 4); to serve one of them again, pass --to 4."
  )
  # Rolling forward on purpose is allowed, and makes that content pushable again.
  forward = rollback.rollback(str(serving), "digits", to_version=3, reason="false alarm")
  assert forward.version == 6
  assert (serving / "digits" / "6" / "saved_model.pb").read_bytes() == b"pb:v3"


def test_rollback_errors(tmp_path):
  serving = tmp_path / "serving"
  with pytest.raises(paths.PusherError, match="nothing has been pushed"):
    rollback.rollback(str(serving), "digits", previous=True)
  _push(tmp_path, serving, "a")
  _push(tmp_path, serving, "b")
  with pytest.raises(paths.PusherError, match="already live"):
    rollback.rollback(str(serving), "digits", to_version=2)
  with pytest.raises(paths.PusherError, match="does not exist"):
    rollback.rollback(str(serving), "digits", to_version=9)
  with pytest.raises(paths.PusherError, match="exactly one"):
    rollback.rollback(str(serving), "digits", to_version=1, previous=True)
  with pytest.raises(paths.PusherError, match="exactly one"):
    rollback.rollback(str(serving), "digits")
  (serving / "digits" / "1" / "saved_model.pb").write_bytes(b"corrupt")
  with pytest.raises(paths.PusherError, match="fails verification"):
    rollback.rollback(str(serving), "digits", to_version=1)
  assert versions.list_versions(str(serving), "digits") == [1, 2]


@pytest.mark.parametrize(
  "name", ["", "..", ".", "../etc", "a/b", "/abs", ".hidden", "a\\b", "x" * 129, "a b", "a\0b"]
)
def test_invalid_model_names_are_rejected(tmp_path, name):
  src = _fake_saved_model(tmp_path / "src", "a")
  with pytest.raises(paths.PusherError, match="Invalid model name"):
    publish.push_version(str(tmp_path / "serving"), name, src)
  assert not (tmp_path / "serving").exists() or not any((tmp_path / "serving").iterdir())
  assert not (tmp_path / "etc").exists()


@pytest.mark.parametrize("version", ["", "-1", "1.5", "../1", "1/2", "abc", " 1", "1e3", -3])
def test_invalid_versions_are_rejected(version):
  with pytest.raises(paths.PusherError, match="Invalid version"):
    paths.parse_version(version)


def test_version_path_and_serving_dir_validation(tmp_path):
  assert paths.version_path("/srv/models", "digits", "007") == "/srv/models/digits/7"
  with pytest.raises(paths.PusherError, match="relative"):
    paths.model_dir("serving", "digits")
  assert paths.model_dir("gs://bucket/models/", "digits") == "gs://bucket/models/digits"
  with pytest.raises(paths.PusherError, match="not a valid URI"):
    paths.model_dir("gs:///models", "digits")
  with pytest.raises(paths.PusherError, match="empty"):
    paths.model_dir("", "digits")


def test_invalid_variant_name_and_missing_saved_model(tmp_path):
  src = _fake_saved_model(tmp_path / "src", "a")
  with pytest.raises(paths.PusherError, match="Invalid variant name"):
    publish.push_version(str(tmp_path / "s"), "digits", src, variants={"../x": src})
  with pytest.raises(paths.PusherError, match="No SavedModel"):
    publish.push_version(str(tmp_path / "s"), "digits", str(tmp_path))
  assert versions.list_versions(str(tmp_path / "s"), "digits") == []


def test_leftover_staging_is_cleaned_and_torn_history_line_skipped(tmp_path):
  serving = tmp_path / "serving"
  _push(tmp_path, serving, "a")
  leftover = serving / "digits" / ".staging-deadbeef"
  (leftover / "variables").mkdir(parents=True)
  (leftover / "variables" / "variables.index").write_bytes(b"half")
  with open(serving / "digits" / "history.jsonl", "a") as f:
    f.write('{"event": "pu')  # What a kill -9 during an append leaves behind.
  result = _push(tmp_path, serving, "b")
  assert result.version == 2
  assert not leftover.exists()
  events = [(h["event"], h["version"]) for h in history.read_history(str(serving), "digits")]
  assert events == [("push", 1), ("push", 2)]


def test_describe_versions_marks_live_and_problems(tmp_path):
  serving = tmp_path / "serving"
  tfl = tmp_path / "tfl"
  tfl.mkdir()
  (tfl / "model.tflite").write_bytes(b"t")
  _push(
    tmp_path, serving, "a", variants={"tflite": str(tfl)}, variant_metrics={"tflite": {"acc": 1}}
  )
  _push(tmp_path, serving, "b")
  (serving / "digits" / "1" / "saved_model.pb").write_bytes(b"corrupt")
  rows = versions.describe_versions(str(serving), "digits")
  assert [(r["version"], r["live"]) for r in rows] == [(1, False), (2, True)]
  assert rows[0]["variants"] == {"tflite": {"acc": 1}}
  assert rows[0]["problems"] and rows[1]["problems"] == []
