"""Report pages: one self-contained HTML page per run, and one over a model's nights.

`run_page.write_run_page(output_dir)` reads what a run left (run_summary.json and the artifacts
it points at) and writes report.html beside it; `nights_page.write_nights_page` draws a serving
folder's nights log. Plain Python: no TFX types in the API. See docs/report.md.
"""
