"""The inventory of a model's serving folder: its versions, their verification and description.

Every function takes a local serving root or an object-store URI (gs://, s3://) and reads it
through `store`.
"""

from __future__ import annotations

from typing import Any

from components.serving import live, manifest, paths, store


def list_versions(serving_dir: str, model_name: str) -> list[int]:
  """Lists the version folders TF Serving would consider, ascending.

  On an object store, a folder without a manifest (a push in progress, or one that died) is
  left out; a local version appears complete, by one rename.

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name.

  Returns:
    Sorted version numbers; empty if the model folder does not exist.
  """
  return store.folder(paths.model_dir(serving_dir, model_name)).versions()


def verify_version(path: str) -> list[str]:
  """Checks that a version folder is complete and that every file matches its sha256.

  Args:
    path: The version folder.

  Returns:
    A list of problems; empty when the version is complete and intact.
  """
  return store.verify(path)


def describe_versions(serving_dir: str, model_name: str) -> list[dict[str, Any]]:
  """Summarises every version for listing: live marker, event, variants and their metrics.

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name.

  Returns:
    One dict per version, ascending, with keys ``version``, ``live``, ``created_at``,
    ``event``, ``republished_from``, ``content_sha256``, ``data_spans``, ``problems`` and
    ``variants``.
  """
  folder = store.folder(paths.model_dir(serving_dir, model_name))
  current = live.live_in(folder)
  rows = []
  for version in folder.versions():
    found = folder.manifest(version)
    rows.append(
      {
        "version": version,
        "live": current is not None and version == current.version,
        "created_at": found.get(manifest.CREATED_AT_FIELD),
        "event": found.get(manifest.EVENT_FIELD),
        "republished_from": manifest.republished_from(found),
        "content_sha256": found.get(manifest.CONTENT_SHA256_FIELD),
        manifest.DATA_SPANS_FIELD: found.get(manifest.DATA_SPANS_FIELD),
        "problems": store.verify(folder.path(version)),
        "variants": {
          name: info.get("metrics", {})
          for name, info in found.get(manifest.VARIANTS_FIELD, {}).items()
        },
      }
    )
  return rows
