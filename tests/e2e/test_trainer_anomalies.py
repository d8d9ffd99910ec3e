"""Training refuses data that ExampleValidator flagged, naming the anomalies."""

import pytest
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.types import artifact_utils, standard_artifacts

from components.distributed_trainer import anomalies_lib
from core.errors import UserInputError
from tests.support.cli_runs import load_summary, run_script


def _anomalies_artifact(tmp_path, blessed, features):
  artifact = standard_artifacts.ExampleAnomalies()
  artifact.uri = str(tmp_path / "anomalies")
  artifact.split_names = artifact_utils.encode_split_names(["train", "eval"])
  artifact.set_json_value_custom_property("blessed", blessed)
  for split in ("train", "eval"):
    d = tmp_path / "anomalies" / f"Split-{split}"
    d.mkdir(parents=True)
    proto = anomalies_pb2.Anomalies()
    if split == "train":
      for name, text in features.items():
        proto.anomaly_info[name].short_description = text
    (d / "SchemaDiff.pb").write_bytes(proto.SerializeToString())
  return artifact


def test_clean_data_passes(tmp_path):
  anomalies_lib.check_no_anomalies([_anomalies_artifact(tmp_path, {"train": 1, "eval": 1}, {})])
  anomalies_lib.check_no_anomalies([])


def test_anomalies_stop_training_with_their_names(tmp_path):
  artifact = _anomalies_artifact(
    tmp_path, {"train": 0, "eval": 1}, {"pixel_3": "Out-of-range values", "label": "New column"}
  )
  with pytest.raises(UserInputError) as err:
    anomalies_lib.check_no_anomalies([artifact])
  msg = str(err.value)
  assert "split 'train'" in msg
  assert "feature 'label': New column" in msg and "feature 'pixel_3': Out-of-range values" in msg
  assert "fix the data or update the schema" in msg


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_pipeline_stops_before_training_on_anomalies(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  rows = "".join(f"{i % 9},{i % 2}\n" for i in range(200))
  (data / "d.csv").write_text("x,label\n" + rows)
  schema = tmp_path / "schema.pbtxt"
  schema.write_text(
    'feature { name: "x" type: INT int_domain { min: 0 max: 5 } '
    "presence { min_fraction: 1 } shape { dim { size: 1 } } }\n"
    'feature { name: "label" type: INT presence { min_fraction: 1 } shape { dim { size: 1 } } }\n'
  )
  out = tmp_path / "out"
  proc = run_script(
    "run_local.py",
    "--data-root",
    data,
    "--schema",
    schema,
    "--output-dir",
    out,
    "--optimizer-variants",
    "none",
    "--min-eval-examples",
    "20",
    "--quiet",
    warm=True,
  )
  assert proc.returncode == 1
  assert "Traceback" not in proc.stderr
  errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
  assert len(errors) == 1 and "anomalies" in errors[0] and "'x'" in errors[0], proc.stderr[-2000:]
  states = {c["name"]: c["state"] for c in load_summary(out)["components"]}
  assert states["DistributedTrainer"] == "failed"
  assert "Evaluator" not in states and not (out / "serving").exists()
