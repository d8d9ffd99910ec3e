"""A crontab for tests: a stand-in `crontab` command over a file, a user's table to keep byte
for byte, and cron's way of running a line (its % rule included)."""

from __future__ import annotations

import os
import pathlib
import re
import stat
import subprocess

# A user's crontab with lines that look like ours but are not, a CRLF line, a byte that is not
# UTF-8 and a % that cron turns into stdin: install and remove must keep all of it byte for byte.
USER_CRONTAB = (
  b"MAILTO=ops@example.com\n"
  b"# BEGIN tfx-pipeline-kit nightly-other\n"
  b"15 1 * * * /opt/other/run.sh\n"
  b"# END tfx-pipeline-kit nightly-other\n"
  b"# BEGIN tfx-pipeline-kit digits-nightly-old (notes, no END line)\n"
  b"# 0 2 * * * old-job # tfx-pipeline-kit job=digits-nightly\n"
  b'0 4 * * * echo "# BEGIN tfx-pipeline-kit digits-nightly" > /dev/null\n'
  b"0 5 * * * echo '# END tfx-pipeline-kit digits-nightly' > /dev/null\n"
  b"*/5 * * * * /usr/local/bin/backup --quiet\r\n"
  b"# caf\xe9 (latin-1)\n"
  b"0 3 * * 0 echo '50% done' > /tmp/x\n"
)


def executable(path: pathlib.Path, text: str) -> str:
  path.write_text(text)
  path.chmod(path.stat().st_mode | stat.S_IXUSR)
  return str(path)


def fake_system_crontab(tmp_path, monkeypatch) -> tuple[pathlib.Path, pathlib.Path]:
  """A stand-in `crontab` on PATH: stores the table in a file (USER_CRONTAB to begin with)
  and logs every call. Returns (the table's file, the calls' log)."""
  store = tmp_path / "crontab-store"
  calls = tmp_path / "crontab-calls"
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  executable(
    bin_dir / "crontab",
    "#!/bin/sh\n"
    f'echo "$1" >> "{calls}"\n'
    f'if [ "$1" = "-l" ]; then cat "{store}"\n'
    f'elif [ "$1" = "-" ]; then cat > "{store}"\n'
    "else exit 2; fi\n",
  )
  monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
  store.write_bytes(USER_CRONTAB)
  return store, calls


def cron_split(crontab_text: str) -> list[tuple[str, str | None]]:
  """What a cron daemon runs for each line: (shell command, stdin).

  Blank lines, comments and VAR=value lines are skipped; a job line is five schedule fields
  and a command. The % handling is a port of cronie's do_command.c: a backslash before % is
  dropped, any other backslash is kept together with the character after it, and the first
  unescaped % ends the command (the rest, % turned into line feeds, is the command's stdin).
  """
  jobs = []
  for line in crontab_text.split("\n"):
    text = line.strip()
    if not text or text.startswith("#") or re.match(r"^[A-Za-z_][A-Za-z0-9_]*\s*=", text):
      continue
    command = text.split(None, 5)[5]
    out: list[str] = []
    escaped, stdin = False, None
    for i, ch in enumerate(command):
      if escaped:
        if ch == "%":
          out[-1] = "%"
        else:
          out.append(ch)
        escaped = False
        continue
      if ch == "%":
        stdin = command[i + 1 :].replace("%", "\n")
        break
      escaped = ch == "\\"
      out.append(ch)
    jobs.append(("".join(out), stdin))
  return jobs


def run_like_cron(crontab_text: str, home: pathlib.Path) -> None:
  """Runs each job line of `crontab_text` once, as cron would (/bin/sh -c, sparse environment)."""
  env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "SHELL": "/bin/sh", "LOGNAME": "cron"}
  for command, stdin in cron_split(crontab_text):
    subprocess.run(
      ["/bin/sh", "-c", command], input=stdin or "", env=env, cwd=home, timeout=60, check=False
    )


# The model name the night tests' runs are given.
NIGHT_MODEL = "m"


def night_command(out, python, *run_local_args, limit="6h") -> list[str]:
  """The command line of `schedule.py local night` for `out`, running `python` (run_local.py's
  interpreter, or a stand-in script) with `run_local_args` for the model NIGHT_MODEL, under
  `limit`."""
  import sys

  from tests.support.cli_runs import REPO_ROOT

  command = [sys.executable, str(REPO_ROOT / "pipeline" / "schedule.py"), "local", "night"]
  command += ["--output-dir", str(out), "--job-name", "j", "--time-limit", limit]
  return [*command, "--python", str(python), "--", "--model-name", NIGHT_MODEL, *run_local_args]


def night(out, python, *run_local_args, limit="6h", timeout=120, env=None):
  """Runs `night_command(...)` to its end."""
  from tests.support.cli_runs import REPO_ROOT, project_env

  return subprocess.run(
    night_command(out, python, *run_local_args, limit=limit),
    env=env or project_env(),
    cwd=REPO_ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
    check=False,
  )
