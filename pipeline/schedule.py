"""Schedules the pipeline nightly: a KFP recurring run, or a local crontab entry.

Usage:
  python pipeline/schedule.py kubeflow --cron "0 2 * * *" --experiment E --job-name J \\
      (--package pipeline.json | --compile [run_kubeflow.py options]) [--host URL] [--dry-run]
  python pipeline/schedule.py local install --cron "0 2 * * *" --output-dir D \\
      [--job-name J] [--crontab-file F] [-- run_local.py args ...]
  python pipeline/schedule.py local list|remove --output-dir D [--job-name J]

The job's flags are checked now with the runners' own checks, so a nightly job that would fail
every night is refused at install time. Everything else is in pipeline/cli/schedule.py and
pipeline/cli/scheduling/ (cron forms, the crontab block, the KFP client); see docs/nightly.md.
"""

from pipeline.cli import reporting, schedule

if __name__ == "__main__":
  reporting.exit_process(schedule.main())
