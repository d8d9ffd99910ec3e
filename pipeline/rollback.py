"""Lists, verifies and rolls back the versions the Pusher published for TF Serving.

Usage:
  python pipeline/rollback.py --serving-dir D --model-name M --list [--json]
  python pipeline/rollback.py --serving-dir D --model-name M --previous [--reason TEXT]
  python pipeline/rollback.py --serving-dir D --model-name M --to VERSION [--reason TEXT]

A rollback re-publishes the chosen version's verified files as the new highest version, which
TF Serving's default `latest` policy picks up on its next poll; see docs/pushing-and-rollback.md
and pipeline/cli/rollback.py.
"""

from pipeline.cli import reporting, rollback

if __name__ == "__main__":
  reporting.exit_process(rollback.main())
