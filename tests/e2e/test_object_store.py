"""Object-store paths: the Pusher's upload order, ExampleGen's file access and the whole pipeline on
an S3 server (one run, shared by the tests that read what it wrote).

The S3 server is moto's, started on loopback by the test. TensorFlow reaches it through
tensorflow-io (S3_ENDPOINT) and Beam through boto3 (AWS_ENDPOINT_URL_S3). Everything that
imports tensorflow-io runs in a subprocess: tensorflow-io aborts the interpreter at exit.
"""

import json
import os

import pytest

from components.serving import layout, remote
from tests.support.cli_runs import REPO_ROOT, moto_s3, run_script

BUCKET = "kit"


def _saved_model(root):
  (root / "variables").mkdir(parents=True)
  (root / "variables" / "variables.index").write_bytes(b"index")
  (root / "saved_model.pb").write_bytes(b"graph")
  (root / "fingerprint.pb").write_bytes(b"fp")
  return root


def test_upload_order_puts_saved_model_pb_after_model_files_and_variants_last(tmp_path):
  model = _saved_model(tmp_path / "model")
  variant = tmp_path / "variant"
  variant.mkdir()
  (variant / "model.tflite").write_bytes(b"tflite")
  files = remote.plan_files(
    str(model), {"tflite_float32": str(variant)}, {}, "assets.extra/variants"
  )
  rels = [rel for _, rel in files]
  assert rels.index("saved_model.pb") > rels.index("variables/variables.index")
  assert rels.index("saved_model.pb") > rels.index("fingerprint.pb")
  assert rels[-1] == "assets.extra/variants/tflite_float32/model.tflite"


def test_versions_without_manifest_are_incomplete_and_removed_by_the_next_push(tmp_path):
  base = tmp_path / "serving" / "m"
  model = _saved_model(tmp_path / "model")
  files = remote.plan_files(str(model), {}, {}, "assets.extra/variants")
  remote.upload_version(str(base), 1, files, {"version": 1})
  (base / "2" / "variables").mkdir(parents=True)  # A push that died before its manifest.
  complete, incomplete = remote.versions(str(base))
  assert (complete, incomplete) == ([1], [2])
  remote.remove_incomplete(str(base), incomplete)
  assert not (base / "2").exists()
  assert json.loads((base / "1" / "manifest.json").read_text()) == {"version": 1}


def test_prune_keeps_the_newest_and_never_the_live_version(tmp_path):
  base = tmp_path / "m"
  model = _saved_model(tmp_path / "model")
  files = remote.plan_files(str(model), {}, {}, "assets.extra/variants")
  for version in (1, 2, 3):
    remote.upload_version(str(base), version, files, {"version": version})
  assert remote.prune(str(base), keep_versions=1, live=3) == [1, 2]
  assert remote.versions(str(base)) == ([3], [])


def test_history_is_one_object_per_event_in_time_order(tmp_path):
  base = str(tmp_path / "m")
  remote.append_log(base, layout.HISTORY.folder, {"event": "push", "version": 1})
  remote.append_log(base, layout.HISTORY.folder, {"event": "push", "version": 2})
  assert [e["version"] for e in remote.read_log(base, layout.HISTORY.folder)] == [1, 2]


@pytest.fixture(scope="module")
def s3_server():
  with moto_s3(BUCKET) as (client, env):
    yield client, env


def test_example_gen_file_access_on_s3_shares_one_client(s3_server, monkeypatch):
  from components.example_gen import io_lib

  client, env = s3_server
  for name, value in env.items():
    if name.startswith("AWS_"):
      monkeypatch.setenv(name, value)
  monkeypatch.setattr(io_lib, "_S3_CLIENTS", {})
  root = f"s3://{BUCKET}/io"
  for rel in ("a.csv", "b.csv", "sub/c.csv", "notes.txt"):
    with io_lib.open_write(f"{root}/{rel}") as f:
      f.write(rel.encode())
  assert io_lib.glob(f"{root}/*.csv") == [f"{root}/a.csv", f"{root}/b.csv"]  # * stays in a folder
  assert io_lib.glob(f"{root}/**.csv") == [f"{root}/{r}" for r in ("a.csv", "b.csv", "sub/c.csv")]
  assert io_lib.glob(f"{root}/a.csv") == [f"{root}/a.csv"]
  assert io_lib.glob(f"{root}/missing.csv") == []
  assert io_lib.size(f"{root}/sub/c.csv") == len(b"sub/c.csv")
  io_lib.rename(f"{root}/a.csv", f"{root}/b.csv")  # over an object that exists
  with io_lib.open_read(f"{root}/b.csv") as f:
    assert f.read() == b"a.csv"
  io_lib.remove(f"{root}/notes.txt")
  io_lib.makedirs(f"{root}/empty")  # no folders on an object store: nothing to do, no error
  assert io_lib.glob(f"{root}/*") == [f"{root}/b.csv"]
  io_lib.rmtree(f"{root}/sub")
  keys = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="io/")["Contents"]]
  assert keys == ["io/b.csv"]
  assert len(io_lib._S3_CLIENTS) == 1  # every call above went through one boto3 client


def _run(env, out, *extra):
  # A child of a warm process (see warm_python), with the S3 server's variables in its
  # environment; tensorflow-io reads them when the run first opens an s3:// path.
  return run_script(
    "run_local.py",
    *("--data-root", f"s3://{BUCKET}/data", "--pipeline-root", f"s3://{BUCKET}/root"),
    *("--serving-dir", f"s3://{BUCKET}/serving", "--output-dir", out, "--model-name", "digits"),
    *("--train-steps", "200", "--optimizer-variants", "tflite_float32", "--tensorrt", "off"),
    *("--quiet", *extra),
    env=env,
    timeout=900,
    warm=True,
  )


@pytest.fixture(scope="module")
def s3_run(s3_server, tmp_path_factory):
  """The pipeline once on the bundled digits, with its data, artifacts and serving folder on S3.

  Returns:
    (boto3 client, the run's process, its --output-dir).
  """
  client, env = s3_server
  client.upload_file(str(REPO_ROOT / "data" / "digits" / "digits.csv"), BUCKET, "data/digits.csv")
  out = tmp_path_factory.mktemp("s3_run") / "out"
  return client, _run(env, out), out


@pytest.mark.e2e
@pytest.mark.timeout(1200)
def test_pipeline_reads_writes_and_pushes_on_s3(s3_run):
  client, first, out = s3_run
  assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
  summary = json.loads((out / "run_summary.json").read_text())
  assert (
    summary["pushed"]["pushed"] and summary["pushed"]["path"] == f"s3://{BUCKET}/serving/digits/1"
  )
  keys = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="")["Contents"]}
  # ExampleGen wrote its splits, the Optimizer its variants, the Pusher a complete version.
  assert any(k.startswith("root/CsvExampleGen/examples/") and "/Split-eval/" in k for k in keys)
  assert any(
    k.startswith("root/Optimizer/optimized_model/") and k.endswith(".tflite") for k in keys
  )
  version = "serving/digits/1/"
  assert version + "saved_model.pb" in keys and version + "manifest.json" in keys
  assert version + "assets.extra/variants/tflite_float32/model.tflite" in keys
  manifest = json.loads(
    client.get_object(Bucket=BUCKET, Key=version + "manifest.json")["Body"].read()
  )
  assert set(manifest["files"]) == {
    k[len(version) :] for k in keys if k.startswith(version) and not k.endswith("manifest.json")
  }
  assert not os.path.exists(out / "pipeline_root")


@pytest.mark.e2e
@pytest.mark.timeout(1200)
def test_the_serving_folder_on_s3_holds_the_version_its_history_and_the_nights(s3_run):
  # The version, the Pusher's history and the night's record, and nothing else (no staging
  # leftovers). Pushing the same training again, a new version and a rollback on S3 are the
  # Pusher's and the rollback runner's: tests/component/test_pusher_object_store.py.
  client, first, _ = s3_run
  assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
  listed = client.list_objects_v2(Bucket=BUCKET, Prefix="serving/digits/", Delimiter="/")
  assert [p["Prefix"] for p in listed.get("CommonPrefixes", [])] == [
    "serving/digits/.history/",
    "serving/digits/.nights/",
    "serving/digits/1/",
  ]
