"""Reads the trainer's per-process epoch log (trainer_api.progress_path)."""

from __future__ import annotations

import json
import os
from typing import Any

from components.distributed_trainer import trainer_api


def read_progress(model_run_dir: str, task_type: str, task_index: int) -> list[dict[str, Any]]:
  """Returns the epoch events of one process ([] before it starts)."""
  path = trainer_api.progress_path(model_run_dir, task_type, task_index)
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]
