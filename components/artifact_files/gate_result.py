"""Reads the DataGate's report, gate.json, from its result artifact."""

from __future__ import annotations

import json
import os
from typing import Any

from tfx import types
from tfx.utils import io_utils

from core import properties


def read_report(result: types.Artifact) -> dict[str, Any]:
  """The report a DataGate wrote into its result artifact."""
  return json.loads(
    io_utils.read_string_file(os.path.join(result.uri, properties.GATE_REPORT_FILE))
  )
