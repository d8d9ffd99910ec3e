"""Each variant's signature.json: the input/output contract a client of the variant needs."""

from __future__ import annotations

from typing import Any

from components.optimizer.formats import runtime_base
from components.optimizer.run_config import ModelFacts

SIGNATURE_FILE = "signature.json"
SIGNATURE_FORMAT = "tfx-pipeline-kit.variant-signature/1"


def signature_document(
  variant: str, runtime: runtime_base.Runtime, model_file: str, facts: ModelFacts
) -> dict[str, Any]:
  """The input/output contract of one variant, as written to its signature.json.

  It is what a client needs: input names, order, dtypes, shapes, quantization, missing values
  and label classes.

  Args:
    variant: the variant's name.
    runtime: the runtime the variant was measured in; it describes its own inputs and outputs.
    model_file: the file the runtime loads, relative to the variant folder.
    facts: the model's task, label, columns and missing values.

  Returns:
    The signature.json document.
  """
  described = runtime.signature()
  inputs = []
  for position, described_input in enumerate(described.get("inputs", [])):
    entry = dict(described_input)
    entry["position"] = position
    entry["columns"] = facts.columns.get(entry["name"], [entry["name"]])
    if entry["name"] in facts.missing:
      entry["missing_value"] = facts.missing[entry["name"]]
    inputs.append(entry)
  doc = {
    "format": SIGNATURE_FORMAT,
    "variant": variant,
    "runtime": runtime.name,
    "model_file": model_file,
    "inputs": inputs,
    "outputs": described.get("outputs", []),
    "task": facts.task,
    "label": {"key": facts.label_key, "classes": list(facts.classes)},
    "output_meaning": facts.output,
    "preprocessing_included": facts.preprocessing_included,
  }
  if "signature_key" in described:
    doc["signature_key"] = described["signature_key"]
  if not facts.preprocessing_included:
    doc["transform_graph"] = (
      "this variant takes transformed features: run the shipped transform graph "
      "(tft.TFTransformOutput(...).transform_features_layer()) on raw features first"
    )
  return doc
