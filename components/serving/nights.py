"""Where the nights are kept in the model folder: the open nights' facts and the nights log.

While a night runs, each step that knows something about it writes its facts under the night's
id (`layout.OPEN_DIR/<night>/<step>.json`, written whole and renamed into place). When the
night ends, its record is appended to the nights log (`layout.NIGHTS`) and the open folder
removed. What a record says is `components.nights.nights_lib`'s; this module only keeps them.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from typing import Any

from components import storage
from components.serving import layout, paths, store

_FACTS_SUFFIX = ".json"
# Beside a first night's facts: the folders its first write created, removed again by `discard`.
_CREATED = "created.folders"


def _safe(night: str) -> str:
  return "".join(c if c.isalnum() or c in "-_.:" else "_" for c in night)[:120]


def _open_folder(serving_dir: str, model_name: str, night: str) -> str:
  return posixpath.join(paths.model_dir(serving_dir, model_name), layout.OPEN_DIR, _safe(night))


def holds_only_open_nights(serving_dir: str, model_name: str) -> bool:
  """Whether the model's folder is absent or holds nothing but open nights' facts: nothing
  was pushed or recorded yet (False for a name the serving folder cannot hold)."""
  try:
    base = paths.model_dir(serving_dir, model_name)
  except paths.PusherError:
    return False
  fileio = storage.files(serving_dir)
  if not fileio.isdir(base):
    return not fileio.exists(base)
  return all(entry.rstrip("/") == layout.OPEN_DIR for entry in fileio.listdir(base))


def record_facts(
  serving_dir: str, model_name: str, night: str, step: str, facts: Mapping[str, Any]
) -> None:
  """Keeps one step's facts about a night that is still running."""
  fileio = storage.files(serving_dir)
  folder = _open_folder(serving_dir, model_name, night)
  base = paths.model_dir(serving_dir, model_name)
  created = [p for p in (serving_dir, base) if not fileio.exists(p)]
  fileio.makedirs(folder)
  if created:
    with fileio.open(posixpath.join(folder, _CREATED), "w") as f:
      f.write("\n".join(created))
  path = posixpath.join(folder, f"{step}{_FACTS_SUFFIX}")
  tmp = f"{path}.tmp"
  with fileio.open(tmp, "w") as f:
    f.write(json.dumps(dict(facts), sort_keys=True, default=str))
  fileio.rename(tmp, path, overwrite=True)


def open_facts(serving_dir: str, model_name: str, night: str) -> dict[str, dict[str, Any]]:
  """The facts the steps of a night have recorded so far, by step."""
  fileio = storage.files(serving_dir)
  folder = _open_folder(serving_dir, model_name, night)
  out: dict[str, dict[str, Any]] = {}
  if not fileio.exists(folder):
    return out
  for entry in fileio.listdir(folder):
    name = entry.rstrip("/")
    if not name.endswith(_FACTS_SUFFIX):
      continue
    try:
      with fileio.open(posixpath.join(folder, name), "r") as f:
        out[name[: -len(_FACTS_SUFFIX)]] = json.loads(f.read())
    except (OSError, json.JSONDecodeError):
      continue
  return out


def close_facts(serving_dir: str, model_name: str, night: str) -> None:
  """Removes the facts of a night whose record has been written (and the open-nights folder
  once no night is open)."""
  fileio = storage.files(serving_dir)
  folder = _open_folder(serving_dir, model_name, night)
  if fileio.exists(folder):
    fileio.rmtree(folder)
  parent = posixpath.dirname(folder)
  if fileio.exists(parent) and not fileio.listdir(parent):
    fileio.rmtree(parent)


def discard(serving_dir: str, model_name: str, night: str) -> None:
  """Removes a night's facts without a record, and the folders its first write created once
  they are empty again: a first night that pushed nothing leaves the serving folder as it was."""
  fileio = storage.files(serving_dir)
  marker = posixpath.join(_open_folder(serving_dir, model_name, night), _CREATED)
  created: list[str] = []
  if fileio.exists(marker):
    with fileio.open(marker, "r") as f:
      created = [line for line in f.read().splitlines() if line]
  close_facts(serving_dir, model_name, night)
  for folder in sorted(created, key=len, reverse=True):  # The model folder before its parent.
    if fileio.exists(folder) and not fileio.listdir(folder):
      fileio.rmtree(folder)


def open_nights(serving_dir: str, model_name: str) -> list[str]:
  """The ids of the nights whose facts are open in the model's folder, sorted."""
  fileio = storage.files(serving_dir)
  root = posixpath.join(paths.model_dir(serving_dir, model_name), layout.OPEN_DIR)
  if not fileio.exists(root):
    return []
  return sorted(entry.rstrip("/") for entry in fileio.listdir(root))


def stale_nights(serving_dir: str, model_name: str, older_than_s: float) -> list[str]:
  """Open nights whose facts were last written more than `older_than_s` ago: nights whose
  process died before it could close them (a kill, a lost machine)."""
  import time

  fileio = storage.files(serving_dir)
  root = posixpath.join(paths.model_dir(serving_dir, model_name), layout.OPEN_DIR)
  if not fileio.exists(root):
    return []
  stale = []
  for entry in fileio.listdir(root):
    folder = posixpath.join(root, entry.rstrip("/"))
    times = [fileio.stat(posixpath.join(folder, n)).mtime_nsec for n in fileio.listdir(folder)]
    if not times or time.time() - max(times) / 1e9 > older_than_s:
      stale.append(entry.rstrip("/"))
  return sorted(stale)


def append_record(serving_dir: str, model_name: str, record: Mapping[str, Any]) -> None:
  """Appends one record to the model's nights log (local file or object-store folder)."""
  store.folder(paths.model_dir(serving_dir, model_name)).append_log(layout.NIGHTS, record)


def read_records(serving_dir: str, model_name: str) -> list[dict[str, Any]]:
  """The nights' records, oldest first."""
  return store.folder(paths.model_dir(serving_dir, model_name)).read_log(layout.NIGHTS)
