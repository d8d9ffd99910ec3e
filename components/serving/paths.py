"""Checked paths into the serving folder: serving root, model name, version number.

Plain Python (no TFX or TensorFlow), so the rollback command and the runners' checks can
validate their arguments cheaply.
"""

from __future__ import annotations

import os
import re

from components import storage
from components.serving import layout
from core.errors import UserInputError

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_URI = re.compile(r"^[a-z][a-z0-9+.-]*://[^/]+(/.*)?$")


class PusherError(UserInputError):
  """A problem with the serving folder the user can fix (bad name, missing model, nothing to
  roll back to)."""


def validate_model_name(name: str, what: str = "model name") -> str:
  """Checks that a model (or variant) name is a single safe path component.

  Args:
    name: The name to check.
    what: How to call the name in the error message.

  Returns:
    The name, unchanged.

  Raises:
    PusherError: If the name is empty, contains a slash, starts with a dot (``..`` included),
      or uses characters other than letters, digits, ``.``, ``_`` and ``-``.
  """
  if not isinstance(name, str) or not _NAME_RE.match(name):
    raise PusherError(
      f"Invalid {what} {name!r}: use 1-128 letters, digits, '.', '_' or '-', starting with a "
      "letter or digit (no slashes, no '..', no absolute paths)."
    )
  return name


def parse_version(text: str | int) -> int:
  """Parses a version number as TF Serving understands it (an all-digit folder name).

  Args:
    text: The version, e.g. ``"3"`` or ``3``.

  Returns:
    The version as an int.

  Raises:
    PusherError: If the version is not a non-negative integer written with digits only.
  """
  if isinstance(text, bool):
    raise PusherError(f"Invalid version {text!r}: pass a non-negative integer such as 3.")
  if isinstance(text, int):
    if text < 0:
      raise PusherError(f"Invalid version {text!r}: pass a non-negative integer such as 3.")
    return text
  if not isinstance(text, str) or not layout.is_version_name(text):
    raise PusherError(
      f"Invalid version {text!r}: pass a non-negative integer such as 3 (digits only)."
    )
  return int(text)


def validate_serving_dir(serving_dir: str) -> str:
  """Checks a serving root: an absolute local path, or an object-store URI (gs://, s3://).

  Args:
    serving_dir: Root folder that TF Serving watches (one sub-folder per model).

  Returns:
    The normalised path (URIs without a trailing slash).

  Raises:
    PusherError: If the path is empty, relative, or a malformed URI.
  """
  if not isinstance(serving_dir, str) or not serving_dir:
    raise PusherError("serving_dir is empty: pass an absolute local path such as /srv/models.")
  if storage.is_remote(serving_dir):
    if not _URI.match(serving_dir) or "/../" in f"{serving_dir}/":
      raise PusherError(
        f"serving_dir {serving_dir!r} is not a valid URI; pass e.g. gs://bucket/models."
      )
    return serving_dir.rstrip("/")
  if not os.path.isabs(serving_dir):
    raise PusherError(
      f"serving_dir {serving_dir!r} is relative; pass an absolute path such as /srv/models."
    )
  return os.path.normpath(serving_dir)


def model_dir(serving_dir: str, model_name: str) -> str:
  """Returns ``<serving_dir>/<model_name>`` after validating both parts.

  Args:
    serving_dir: Serving root (absolute local path or URI).
    model_name: Model name (one path component).

  Returns:
    The model's base path, the folder TF Serving is pointed at.

  Raises:
    PusherError: If either part is invalid.
  """
  root = validate_serving_dir(serving_dir)
  name = validate_model_name(model_name)
  if storage.is_remote(root):
    return f"{root}/{name}"
  path = os.path.join(root, name)
  # Belt and braces: the name regex already forbids separators and dot-dot.
  if os.path.dirname(path) != root:
    raise PusherError(f"Model name {model_name!r} would escape the serving root {root!r}.")
  return path


def version_path(serving_dir: str, model_name: str, version: int | str) -> str:
  """Returns the folder of one version after validating all parts.

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name.
    version: Version number.

  Returns:
    ``<serving_dir>/<model_name>/<version>``.

  Raises:
    PusherError: If any part is invalid.
  """
  return os.path.join(model_dir(serving_dir, model_name), str(parse_version(version)))
