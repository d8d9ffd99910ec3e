"""The serving clients on the Optimizer page load as the end-to-end tests load them (through
TensorFlow). The docs' links and runnable blocks: tests/fast/test_doc_pages.py."""

from __future__ import annotations


def test_the_serving_clients_the_end_to_end_tests_run_are_on_the_optimizer_page():
  from tests.support import serving_clients

  assert callable(serving_clients.readme_function("client-snippet", "score_rows"))
  assert callable(serving_clients.readme_function("rest-client", "rows_request"))


def test_the_rest_client_reads_missing_tokens_and_padded_headers_as_training_did(tmp_path):
  """Rows of the training CSV itself: its NA and null cells were gaps to the ExampleGen (the
  client raised ValueError), and its header's " age " was the column age (the client sent NaN
  for it, and the model answered for the mean age)."""
  import json
  import math

  from tests.support import serving_clients

  rows_request = serving_clients.readme_function("rest-client", "rows_request")
  contract = {
    "inputs": [
      {"dtype": "float32", "columns": [{"column": c, "rows_input": c} for c in ("age", "pay")]},
      {"dtype": "string", "columns": [{"column": "plan", "rows_input": "text_plan"}]},
    ]
  }
  (tmp_path / "assets.extra").mkdir()
  (tmp_path / "assets.extra" / "contract.json").write_text(json.dumps(contract))
  rows = [{" age ": "35", "pay": "NA", "plan": "basic"}, {" age ": "", "pay": "null", "plan": ""}]

  [first, second] = json.loads(rows_request(str(tmp_path), rows))["instances"]

  assert first["age"] == 35.0 and math.isnan(first["pay"]) and first["text_plan"] == "basic"
  assert math.isnan(second["age"]) and math.isnan(second["pay"]) and second["text_plan"] == ""
