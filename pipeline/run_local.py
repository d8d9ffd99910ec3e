"""Runs the pipeline on LocalDagRunner with SQLite ML Metadata; defaults use the bundled digits.

Usage:
  python pipeline/run_local.py                          # the bundled digits, into output/
  python pipeline/run_local.py --data-root DIR          # your CSV files (task from the label)
  python pipeline/run_local.py --help                   # every flag

Each run checks its flags and data up front (a mistake is one line naming the fix), holds a
lock on --output-dir, marks FAILED the executions a killed run left RUNNING, then runs
`pipeline.definition.factory.create_pipeline(config)` with a live table of the components.
It writes run_summary.json and logs/ under --output-dir and pushes to --serving-dir (default:
<output-dir>/serving).

The pieces, for readers and for tools that want them without this script:
  pipeline/definition/   the pipeline: PipelineConfig, create_pipeline, node ids
  pipeline/cli/local.py  the flags, the checks, the run, the summary (called here)
"""

from pipeline.cli import local, reporting

if __name__ == "__main__":
  reporting.exit_process(local.main())
