"""Publishing from several processes: a real kill -9 mid-push, and concurrent pushes from two."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from components.serving import history, versions

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

# Runs one or more pushes in a child process. The library's per-file copy is wrapped to report
# each finished file on stdout and to sleep after it (for long after file number `pause_after`),
# so the parent can kill the child at a known point while the version is half-staged.
_DRIVER = r"""
import json, os, sys, time
from components.serving import local, publish

serving, src_root, names, delay, pause_after, go_file = sys.argv[1:7]
real_copy = local._copy_file
copied = 0

def slow_copy(src, dst):
  global copied
  out = real_copy(src, dst)
  copied += 1
  print("copied", os.path.basename(dst), flush=True)
  time.sleep(600 if copied == int(pause_after) else float(delay))
  return out

local._copy_file = slow_copy
while go_file != "-" and not os.path.exists(go_file):
  time.sleep(0.01)
for name in names.split(","):
  result = publish.push_version(
    serving, "digits", os.path.join(src_root, name),
    variants={"tflite": os.path.join(src_root, name + "-tflite")}, keep_versions=100)
  print("pushed", json.dumps({"name": name, "version": result.version}), flush=True)
"""


def _make_source(root: pathlib.Path, name: str) -> None:
  model = root / name
  (model / "variables").mkdir(parents=True)
  (model / "saved_model.pb").write_bytes(name.encode() * 100)
  for i in range(4):
    (model / "variables" / f"shard-{i}").write_bytes(os.urandom(2048))
  variant = root / f"{name}-tflite"
  variant.mkdir()
  (variant / "model.tflite").write_bytes(b"tflite-" + name.encode())


def _start(serving, src_root, names, *, delay=0.0, pause_after=-1, go_file="-"):
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", PYTHONPATH=str(REPO_ROOT))
  return subprocess.Popen(
    [
      sys.executable,
      "-c",
      _DRIVER,
      str(serving),
      str(src_root),
      ",".join(names),
      str(delay),
      str(pause_after),
      str(go_file),
    ],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    env=env,
    cwd=REPO_ROOT,
  )


def _assert_only_complete_versions(serving: pathlib.Path) -> list[int]:
  found = versions.list_versions(str(serving), "digits")
  for version in found:
    path = serving / "digits" / str(version)
    assert (path / "saved_model.pb").is_file()
    assert versions.verify_version(str(path)) == [], version
  return found


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
@pytest.mark.parametrize("files_before_kill", [1, 5])
def test_kill_9_mid_push_leaves_only_complete_versions(tmp_path, files_before_kill):
  serving = tmp_path / "serving"
  src = tmp_path / "src"
  for name in ("m1", "m2", "m3"):
    _make_source(src, name)
  first = _start(serving, src, ["m1"])
  assert first.wait(timeout=60) == 0, first.stderr.read()

  # 6 files per push (pb, 4 shards, tflite): kill after the 1st (model half-copied) or the
  # 5th (SavedModel done, variant and manifest not yet written).
  victim = _start(serving, src, ["m2"], pause_after=files_before_kill)
  try:
    copied = 0
    for line in victim.stdout:
      copied += line.startswith("copied")
      if copied == files_before_kill:
        break
  finally:
    os.kill(victim.pid, signal.SIGKILL)
    assert victim.wait(timeout=30) == -signal.SIGKILL
  assert copied == files_before_kill

  model_dir = serving / "digits"
  staging = [p for p in model_dir.iterdir() if p.name.startswith(".staging-")]
  assert len(staging) == 1  # The killed push's half-written staging folder...
  assert _assert_only_complete_versions(serving) == [1]  # ...but TF Serving sees only v1.
  assert [h["version"] for h in history.read_history(str(serving), "digits")] == [1]

  # The next push (even while the crashed one's lock file is still there) cleans up and
  # publishes the next version.
  survivor = _start(serving, src, ["m3"])
  assert survivor.wait(timeout=60) == 0, survivor.stderr.read()
  assert not [p for p in model_dir.iterdir() if p.name.startswith(".staging-")]
  assert _assert_only_complete_versions(serving) == [1, 2]
  assert (model_dir / "2" / "saved_model.pb").read_bytes() == b"m3" * 100


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_concurrent_pushes_from_two_processes_get_distinct_increasing_versions(tmp_path):
  serving = tmp_path / "serving"
  src = tmp_path / "src"
  names_a = [f"a{i}" for i in range(4)]
  names_b = [f"b{i}" for i in range(4)]
  for name in names_a + names_b:
    _make_source(src, name)
  go_file = tmp_path / "go"
  procs = [
    _start(serving, src, names, delay=0.005, go_file=go_file) for names in (names_a, names_b)
  ]
  time.sleep(0.5)  # Let both children finish importing so they race for the lock.
  go_file.write_text("go")
  results = {}
  for proc in procs:
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    pushed = [
      json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("pushed")
    ]
    numbers = [p["version"] for p in pushed]
    assert numbers == sorted(numbers)  # Monotonic within each process.
    results.update({p["name"]: p["version"] for p in pushed})

  assert sorted(results.values()) == list(range(1, 9))  # Distinct, no gaps, no collisions.
  assert _assert_only_complete_versions(serving) == list(range(1, 9))
  for name, version in results.items():
    saved_model = serving / "digits" / str(version) / "saved_model.pb"
    assert saved_model.read_bytes() == name.encode() * 100
  entries = history.read_history(str(serving), "digits")
  assert sorted(h["version"] for h in entries if h["event"] == "push") == list(range(1, 9))
