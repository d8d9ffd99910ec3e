"""Reading one flag's value from command-line arguments (Beam's, or a container's)."""

from __future__ import annotations

from collections.abc import Sequence


def flag_value(args: Sequence[str], flag: str) -> str | None:
  """The value of `flag` (e.g. `--runner`) in `args`, spelt `--flag VALUE` or `--flag=VALUE`.

  The last one wins, as in argparse (and Beam's own parser); None when the flag is not there
  or has no value.
  """
  value = None
  args = list(args)
  for i, arg in enumerate(args):
    if arg == flag and i + 1 < len(args):
      value = args[i + 1]
    elif arg.startswith(flag + "="):
      value = arg[len(flag) + 1 :]
  return value
