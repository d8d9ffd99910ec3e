"""The serving folder's layout, one owner: what the Pusher writes and every reader relies on.

    <serving_dir>/<model_name>/
      <version>/                 a SavedModel that TF Serving loads; numeric, the highest is live
        manifest.json            written last: a version folder without it is incomplete
        assets.extra/variants/   the blessed optimized variants, one folder each
      history.jsonl              a local folder's log: one JSON line per push, rollback or prune
      .history/                  an object store's log: one JSON file per entry (no appends there)

The Pusher (`components/pusher/pusher_lib.py`, `object_store_lib.py`), LiveModel
(`components/live_model/live_model_lib.py`) and `pipeline/rollback.py` read these names from
here. Plain Python: no TensorFlow or TFX.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "tfx-pipeline-kit.pusher-manifest/1"
HISTORY_FILE = "history.jsonl"
HISTORY_DIR = ".history"
VARIANTS_SUBDIR = "assets.extra/variants"
# The manifest field where the Pusher records the key its run's LiveModel was cached by.
LIVE_KEY_FIELD = "live_key"

# ASCII digits only (str.isdigit also takes '²' or '٣'), at most 18 so the number fits int64.
_VERSION_NAME = re.compile(r"[0-9]{1,18}")


def is_version_name(name: str) -> bool:
  """Whether a folder name is a version number TF Serving would load."""
  return bool(_VERSION_NAME.fullmatch(name))


def version_numbers(names: Iterable[str]) -> list[int]:
  """The version numbers among folder names, ascending (the last one is live)."""
  return sorted(int(n) for n in names if is_version_name(n))


def is_variants_path(rel_path: str) -> bool:
  """Whether a path relative to a version folder lies under the variants folder."""
  parts = rel_path.replace("\\", "/").split("/")
  return parts[:2] == VARIANTS_SUBDIR.split("/")


def training_fingerprint(manifest: Mapping[str, Any]) -> str | None:
  """The fingerprint of the training run that produced a version (None before it was recorded)."""
  return (manifest.get("model") or {}).get("training_fingerprint")
