"""The object-store backend (gs://, s3://): publishing where there is no rename and no lock.

The layout under `<serving_dir>/<model_name>/` is the local one (numeric version folders,
each with manifest.json), except that a log is one object per entry in a folder
(`layout.Log.folder`: an object store cannot append). Files are uploaded in this order: the
SavedModel's files, `saved_model.pb` after them (TF Serving, like TFX's stock Pusher assumes,
starts loading once it sees that file), the variants and extra folders, and `manifest.json`
last. A version folder without a manifest is a push in progress or one that died, and every
reader (LiveModel, rollback --list, the next push) ignores it; the next push deletes such
leftovers. Object stores give no lock: run one pusher per model at a time (a Kubeflow
recurring run with max_concurrency 1 does).
"""

from __future__ import annotations

import datetime
import json
import os
import posixpath
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from components.serving import layout, local, manifest
from components.serving.paths import PusherError


class _Lazy:
  """TFX's fileio and io_utils, imported on first use (so the package imports cheaply)."""

  def __getattr__(self, name: str):
    from tfx.dsl.io import fileio
    from tfx.utils import io_utils

    if name == "copy_file":
      return io_utils.copy_file
    return getattr(fileio, name)


fileio = _Lazy()
io_utils = fileio


def _join(*parts: str) -> str:
  return posixpath.join(*parts)


def _names(folder: str) -> list[str]:
  if not fileio.exists(folder):
    return []
  return [n.rstrip("/") for n in fileio.listdir(folder)]


def versions(base: str) -> tuple[list[int], list[int]]:
  """(complete versions, incomplete version folders) under a model folder, ascending."""
  complete, incomplete = [], []
  for name in _names(base):
    if not layout.is_version_name(name):
      continue
    has_manifest = fileio.exists(_join(base, name, layout.MANIFEST_FILE))
    (complete if has_manifest else incomplete).append(int(name))
  return sorted(complete), sorted(incomplete)


def read_log(base: str, name: str) -> list[dict[str, Any]]:
  """The entries of a log folder (`layout.Log.folder`), oldest first."""
  folder = _join(base, name)
  entries = []
  for entry_name in sorted(_names(folder)):
    try:
      with fileio.open(_join(folder, entry_name), "r") as f:
        entry = json.loads(f.read())
    except (json.JSONDecodeError, OSError):
      continue
    if isinstance(entry, dict):
      entries.append(entry)
  return entries


def append_log(base: str, name: str, entry: Mapping[str, Any]) -> None:
  """Writes one entry of a log folder (`layout.Log.folder`) as its own object (names sort by
  time)."""
  stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
  path = _join(base, name, f"{stamp}-{uuid.uuid4().hex[:8]}.json")
  fileio.makedirs(posixpath.dirname(path))
  with fileio.open(path, "w") as f:
    f.write(json.dumps(dict(entry), sort_keys=True))


def _tree(src: str, rel_root: str) -> list[tuple[str, str]]:
  """(local file, `rel_root`/its path under `src`) for every file under a local folder."""
  out = []
  for root, _, files in os.walk(src):
    for name in sorted(files):
      path = os.path.join(root, name)
      out.append((path, _join(rel_root, os.path.relpath(path, src).replace(os.sep, "/"))))
  return out


def plan_files(
  saved_model_dir: str,
  variants: Mapping[str, str],
  extra_trees: Mapping[str, str],
  variants_subdir: str,
) -> list[tuple[str, str]]:
  """(local source, version-relative path) of every file, in upload order (manifest not
  included): SavedModel files, saved_model.pb, variants, extra folders."""
  model = sorted(_tree(saved_model_dir, ""), key=lambda item: layout.saved_model_last(item[1]))
  rest = []
  for name, src in sorted(variants.items()):
    rel_root = _join(variants_subdir.replace(os.sep, "/"), name)
    if os.path.isdir(src):
      rest += _tree(src, rel_root)
    else:
      rest.append((src, _join(rel_root, os.path.basename(src))))
  for rel_root, src in sorted(extra_trees.items()):
    rest += _tree(src, rel_root.replace(os.sep, "/"))
  return model + rest


def digest_files(files: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
  """The manifest's `files`: relative path -> sha256 and size."""
  out = {}
  for src, rel in files:
    digest, size = local.sha256_file(src)
    out[rel] = {"sha256": digest, "size": size}
  return out


def upload_version(
  base: str, version: int, files: list[tuple[str, str]], version_manifest: Mapping[str, Any]
) -> str:
  """Uploads a version's files in order and its manifest last; returns the version folder.

  Args:
    base: The model folder.
    version: The new version's number.
    files: (source, version-relative path) in upload order, from `plan_files` or `plan_copy`;
      a source is a local path or another object.
    version_manifest: The version's manifest.

  Returns:
    The version folder.
  """
  target = _join(base, str(version))
  if fileio.exists(target):
    raise RuntimeError(f"version folder {target} already exists; refusing to overwrite it")
  for src, rel in files:
    dst = _join(target, rel)
    fileio.makedirs(posixpath.dirname(dst))
    io_utils.copy_file(src, dst, overwrite=False)
  with fileio.open(_join(target, layout.MANIFEST_FILE), "w") as f:
    f.write(manifest.dumps(version_manifest))
  return target


def remove_incomplete(base: str, incomplete: list[int]) -> None:
  """Deletes version folders a dead push left without a manifest."""
  for version in incomplete:
    fileio.rmtree(_join(base, str(version)))


def prune(base: str, keep_versions: int, live: int | None) -> list[int]:
  """Deletes all but the newest `keep_versions` complete versions, never `live`."""
  complete, _ = versions(base)
  doomed = [v for v in complete[:-keep_versions] if v != live]
  for version in doomed:
    # Manifest first: a half-deleted version then reads as incomplete, never as live.
    fileio.remove(_join(base, str(version), layout.MANIFEST_FILE))
    fileio.rmtree(_join(base, str(version)))
  return doomed


def plan_copy(source: str, rels: Iterable[str]) -> list[tuple[str, str]]:
  """(object, relative path) of a version's files in upload order, saved_model.pb after the rest."""
  return [(_join(source, rel), rel) for rel in sorted(rels, key=layout.saved_model_last)]


def verify(version_dir: str) -> list[str]:
  """Problems of a remote version: missing manifest or files, sha256 mismatches."""
  if not fileio.exists(_join(version_dir, layout.MANIFEST_FILE)):
    return [f"{layout.MANIFEST_FILE} is missing (an incomplete push)"]
  try:
    version_manifest = manifest.read_manifest(version_dir)
  except PusherError as e:
    return [str(e)]
  problems = []
  for rel, info in sorted((version_manifest.get(manifest.FILES_FIELD) or {}).items()):
    path = _join(version_dir, rel)
    if not fileio.exists(path):
      problems.append(f"{rel} is missing")
      continue
    with fileio.open(path, "rb") as f:
      digest, _ = local.sha256_stream(f)
    if digest != info.get("sha256"):
      problems.append(f"{rel} has sha256 {digest}, manifest says {info.get('sha256')}")
  return problems
