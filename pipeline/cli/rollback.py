"""List, verify and roll back the versions the Pusher published for TF Serving.

Usage:
  python pipeline/rollback.py --serving-dir D --model-name M --list [--json]
  python pipeline/rollback.py --serving-dir D --model-name M --previous [--reason TEXT]
  python pipeline/rollback.py --serving-dir D --model-name M --to VERSION [--reason TEXT]

TF Serving's default version policy (`latest`) serves the highest version number, so a
rollback re-publishes the chosen version's files (verified against its manifest) as a new,
highest version through the same staging-and-rename path as a push; TF Serving picks it up on
its next file-system poll without a config change. Every rollback is recorded in the model
folder's history with time, from, to and reason.
"""

import argparse
import errno
import json
import os
import sys

from components import storage
from components.serving import history, live, manifest, paths, rollback, versions
from core.errors import UserInputError
from pipeline.cli.flags import ArgumentParser


def _build_parser() -> argparse.ArgumentParser:
  parser = ArgumentParser(prog="rollback.py", description=__doc__.splitlines()[0])
  parser.add_argument(
    "--serving-dir", required=True, help="TF Serving root (one folder per model)."
  )
  parser.add_argument("--model-name", required=True, help="Model name (folder under the root).")
  action = parser.add_mutually_exclusive_group(required=True)
  action.add_argument("--list", action="store_true", help="Show versions, live marker, metrics.")
  action.add_argument("--to", metavar="VERSION", help="Make this version live again.")
  action.add_argument(
    "--previous",
    action="store_true",
    help="Make the newest earlier version with different content live again.",
  )
  parser.add_argument("--reason", default="", help="Why; recorded in the history.")
  parser.add_argument(
    "--keep-versions",
    type=int,
    default=None,
    help="Also delete all but this many newest versions (default: delete nothing).",
  )
  parser.add_argument("--json", action="store_true", help="With --list: print JSON.")
  return parser


def _format_metrics(metrics: dict) -> str:
  parts = []
  for key, value in sorted(metrics.items()):
    if isinstance(value, float):
      parts.append(f"{key}={value:.4g}")
    elif isinstance(value, int | str):
      parts.append(f"{key}={value}")
  return ",".join(parts)


def _print_list(serving_dir: str, model_name: str, as_json: bool) -> None:
  rows = versions.describe_versions(serving_dir, model_name)
  entries = history.read_history(serving_dir, model_name)
  if as_json:
    print(json.dumps({"versions": rows, "history": entries}, indent=2, sort_keys=True))
    return
  if not rows:
    print(f"No versions under {paths.model_dir(serving_dir, model_name)}.")
    return
  print(f"{'':2}{'VERSION':>8}  {'CREATED (UTC)':20}  {'EVENT':18}  {'STATUS':8}  VARIANTS")
  for row in rows:
    event = row["event"] or "?"
    if row["republished_from"] is not None:
      event = f"rollback of {row['republished_from']}"
    status = "ok" if not row["problems"] else "BROKEN"
    variants = "; ".join(
      f"{name}({_format_metrics(metrics)})" if metrics else name
      for name, metrics in sorted(row["variants"].items())
    )
    print(
      f"{'*' if row['live'] else '':2}{row['version']:>8}  {row['created_at'] or '?':20}  "
      f"{event:18}  {status:8}  {variants or '-'}"
    )
  print(
    "Live (*) = the highest complete version, which TF Serving's default 'latest' policy serves."
  )
  rollbacks = [h for h in entries if h.get("event") == manifest.ROLLBACK_EVENT]
  for entry in rollbacks[-5:]:
    print(
      f"rollback at {entry.get('time')}: {entry.get('from')} -> {entry.get('to')} "
      f"(published as {entry.get('version')}): {entry.get('reason') or 'no reason given'}"
    )


_SERVING_DIR_HINT = (
  "pass the --serving-dir the pipeline pushes to (run_local.py's is <output-dir>/serving)."
)
_MAX_MODELS_SHOWN = 20


def _shown(path: str) -> str:
  # A path with a line feed or escape sequence must not break the one-line message.
  return path if path.isprintable() else repr(path)


def _check_model_folder(serving_dir: str, model_name: str) -> None:
  """Says clearly when the serving dir or the model's folder in it does not exist.

  Without this, a misspelt --serving-dir or --model-name reads as "no versions".

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name (already validated).

  Raises:
    PusherError: If the serving dir is missing or not a folder, or has no folder for the
      model (the message lists the models it has).
  """
  if storage.is_remote(serving_dir):
    from tfx.dsl.io import fileio

    names = (
      [n.rstrip("/") for n in fileio.listdir(serving_dir)] if fileio.exists(serving_dir) else []
    )
    if model_name in names:
      return
    models = sorted(n for n in names if n and not n.startswith("."))
    shown = ", ".join(models[:_MAX_MODELS_SHOWN]) or "none"
    raise paths.PusherError(
      f"serving dir {serving_dir} has no model {model_name!r} (models there: {shown}); "
      f"{_SERVING_DIR_HINT}"
    )
  if not os.path.exists(serving_dir):
    raise paths.PusherError(
      f"serving dir {_shown(serving_dir)} does not exist; {_SERVING_DIR_HINT}"
    )
  if not os.path.isdir(serving_dir):
    raise paths.PusherError(
      f"serving dir {_shown(serving_dir)} is not a folder; {_SERVING_DIR_HINT}"
    )
  if os.path.isdir(os.path.join(serving_dir, model_name)):
    return
  models = sorted(
    entry.name
    for entry in os.scandir(serving_dir)
    if entry.is_dir() and not entry.name.startswith(".") and entry.name.isprintable()
  )
  if not models:
    raise paths.PusherError(
      f"serving dir {_shown(serving_dir)} has no model {model_name!r}, and no models at all: "
      f"nothing has been pushed there yet; {_SERVING_DIR_HINT}"
    )
  listed = ", ".join(models[:_MAX_MODELS_SHOWN])
  if len(models) > _MAX_MODELS_SHOWN:
    listed += f" and {len(models) - _MAX_MODELS_SHOWN} more"
  raise paths.PusherError(
    f"serving dir {_shown(serving_dir)} has no model {model_name!r}; the models there are: "
    f"{listed}. Pass one of them as --model-name."
  )


_CANNOT_WRITE = (errno.EROFS, errno.EACCES, errno.EPERM)
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def _write_problem(error: OSError, model_folder: str) -> str:
  """One line for a file-system error of a rollback, naming the model's folder and the fix.

  A rollback publishes a new version (and takes a lock, and appends to the history) in the
  model's folder, so that folder must be writable by whoever runs it.
  """
  where = _shown(str(error.filename or model_folder))
  if error.errno in _CANNOT_WRITE:
    return (
      f"the model folder {_shown(model_folder)} cannot be written ({error.strerror} at "
      f"{where}); a rollback publishes a new version there: run it as a user who can write "
      "that folder (the one the Pusher runs as), or remount it read-write."
    )
  if error.errno in _NO_SPACE:
    return (
      f"no space left for a new version in {_shown(model_folder)} ({error.strerror} at "
      f"{where}); free space there and retry."
    )
  return f"{error.strerror or error}: {where}"


def main(argv: list[str] | None = None) -> int:
  """Runs the CLI.

  Args:
    argv: Arguments without the program name; defaults to sys.argv[1:].

  Returns:
    The process exit status.
  """
  args = _build_parser().parse_args(argv)
  remote = storage.is_remote(args.serving_dir)
  serving_dir = args.serving_dir if remote else os.path.abspath(args.serving_dir)
  try:
    # Arguments first, then the file system: a bad name is reported as such wherever it points.
    if remote:
      serving_dir = paths.validate_serving_dir(args.serving_dir)
      from components import tf_compat

      tf_compat.register_filesystems([serving_dir])
    paths.validate_model_name(args.model_name)
    if args.to is not None:
      paths.parse_version(args.to)
    _check_model_folder(serving_dir, args.model_name)
    if args.list:
      _print_list(serving_dir, args.model_name, args.json)
      return 0
    before = live.live_version(serving_dir, args.model_name)
    result = rollback.rollback(
      serving_dir,
      args.model_name,
      to_version=args.to,
      previous=args.previous,
      reason=args.reason or "manual rollback",
      keep_versions=args.keep_versions,
    )
  except (paths.PusherError, UserInputError) as e:
    print(f"rollback.py: error: {e}", file=sys.stderr)
    return 1
  except OSError as e:
    # Permissions or a full disk on the serving volume: the user's to fix, not a bug.
    message = _write_problem(e, paths.model_dir(serving_dir, args.model_name))
    print(f"rollback.py: error: {message}", file=sys.stderr)
    return 1
  restored = manifest.republished_from(result.manifest)
  print(
    f"Rolled back {args.model_name}: version {restored} is live again as version "
    f"{result.version} (was {before.version if before else None}); TF Serving loads it on its "
    "next poll."
  )
  if result.removed_versions:
    print(f"Deleted old versions: {', '.join(map(str, result.removed_versions))}")
  return 0
