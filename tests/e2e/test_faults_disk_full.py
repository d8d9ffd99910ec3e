"""Fault suite: a full disk under the output folder gives one clean error and spares serving/."""

from __future__ import annotations

import errno
import os
import pathlib
import subprocess

import pytest

from components.serving import live, publish, versions
from components.serving import nights as serving_nights
from pipeline.cli import reporting
from tests.support.cli_runs import load_summary, run_script


def _fake_saved_model(root: pathlib.Path, size: int) -> str:
  """A folder shaped like a SavedModel; the Pusher copies and hashes it, never parses it."""
  (root / "variables").mkdir(parents=True)
  (root / "variables" / "variables.data-00000-of-00001").write_bytes(os.urandom(size))
  (root / "variables" / "variables.index").write_bytes(b"index")
  (root / "saved_model.pb").write_bytes(b"pb" + os.urandom(64))
  return str(root)


@pytest.fixture
def tiny_fs(tmp_path):
  """Mounts a 512 KiB tmpfs; skips where mounting is not allowed (it needs root)."""
  mount_point = tmp_path / "tiny"
  mount_point.mkdir()
  try:
    proc = subprocess.run(
      ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount_point)],
      capture_output=True,
      text=True,
      timeout=30,
      check=False,
    )
  except FileNotFoundError:
    pytest.skip("no mount command here, so no small filesystem to fill")
  if proc.returncode != 0:
    reason = (proc.stderr.strip().splitlines() or ["mount failed"])[0]
    pytest.skip(f"cannot mount a small tmpfs here (needs root): {reason}")
  try:
    yield mount_point
  finally:
    subprocess.run(["umount", "-l", str(mount_point)], check=False, timeout=30)


def _serving_state(model_dir: pathlib.Path) -> dict[str, bytes | None]:
  return {
    str(p.relative_to(model_dir)): p.read_bytes() if p.is_file() else None
    for p in sorted(model_dir.rglob("*"))
  }


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_run_on_a_full_disk_fails_in_one_line_and_leaves_serving_untouched(tiny_fs, tmp_path):
  """The whole output folder lives on a 512 KiB filesystem that already serves version 1."""
  out = tiny_fs / "out"
  serving = out / "serving"
  v1 = publish.push_version(str(serving), "digits", _fake_saved_model(tmp_path / "v1", 16 << 10))
  assert v1.pushed and v1.version == 1
  model_dir = serving / "digits"
  before = _serving_state(model_dir)

  proc = run_script(
    "run_local.py",
    "--output-dir",
    out,
    "--optimizer-variants",
    "none",
    "--train-steps",
    "100",
    "--min-accuracy",
    "0.5",
    "--quiet",
    timeout=550,
    warm=True,
  )
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
  assert len(errors) == 1, proc.stderr[-3000:]
  # The message names the full disk, where it is, and the fix.
  assert errors[0].startswith("error: no space left on device ")
  assert "free space" in errors[0] and "another --output-dir." in errors[0]
  assert str(out) in errors[0]

  # Every version, manifest and history entry byte for byte; the nights log may gain one
  # record (if the disk had room for it): the failed night's, whose line is the run's.
  after = _serving_state(model_dir)
  after.pop("nights.jsonl", None)
  assert after == before
  nights = serving_nights.read_records(str(serving), "digits")
  assert len(nights) <= 1
  assert all(n["outcome"] == "failed" and "no space left on device" in n["line"] for n in nights)
  assert versions.verify_version(str(model_dir / "1")) == []
  if (out / "run_summary.json").exists():  # Written if the disk had room for it.
    assert load_summary(out)["status"] == "failed"


@pytest.mark.timeout(120)
def test_push_that_hits_a_full_disk_keeps_the_live_version_and_recovers(tiny_fs, tmp_path):
  """ENOSPC in the middle of a push: version 1 stays live and intact, no version 2 appears,
  the error reads as a full disk, and once there is room the next push cleans up and works."""
  serving = tiny_fs / "serving"
  assert publish.push_version(
    str(serving), "digits", _fake_saved_model(tmp_path / "v1", 16 << 10)
  ).pushed
  model_dir = serving / "digits"
  live_v1 = _serving_state(model_dir / "1")

  with pytest.raises(OSError) as err:
    publish.push_version(str(serving), "digits", _fake_saved_model(tmp_path / "big", 2 << 20))
  assert err.value.errno == errno.ENOSPC
  message = reporting.user_error_message(err.value, tiny_fs)
  assert message and message.startswith("no space left on device ")
  assert str(tiny_fs) in message and "free space" in message
  # The run's output folder has room and the serving folder is the full one: the line names the
  # serving folder and its flag (it named the output folder and --output-dir).
  out = tmp_path / "out"
  out.mkdir()
  folders = {"--output-dir": str(out), "--serving-dir": str(serving)}
  for error in (err.value, OSError(errno.ENOSPC, "No space left on device")):
    message = reporting.user_error_message(error, str(out), folders=folders)
    assert str(serving) in message and message.endswith("another --serving-dir."), message
  assert versions.list_versions(str(serving), "digits") == [1]
  assert live.live_version(str(serving), "digits").version == 1
  assert _serving_state(model_dir / "1") == live_v1
  assert versions.verify_version(str(model_dir / "1")) == []
  # Whatever is left of the failed push is hidden from TF Serving (not an all-digit name).
  assert all(not p.name.isdigit() for p in model_dir.iterdir() if p.name != "1")

  v2 = publish.push_version(str(serving), "digits", _fake_saved_model(tmp_path / "v2", 8 << 10))
  assert v2.pushed and v2.version == 2
  names = sorted(p.name for p in model_dir.iterdir() if p.is_dir())
  assert names == ["1", "2"]
  assert versions.verify_version(str(model_dir / "2")) == []
