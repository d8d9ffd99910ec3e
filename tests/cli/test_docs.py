"""The serving clients on the Optimizer page load as the end-to-end tests load them (through
TensorFlow). The docs' links and runnable blocks: tests/fast/test_doc_pages.py."""

from __future__ import annotations


def test_the_serving_clients_the_end_to_end_tests_run_are_on_the_optimizer_page():
  from tests.support import serving_clients

  assert callable(serving_clients.readme_function("client-snippet", "score_rows"))
  assert callable(serving_clients.readme_function("rest-client", "rows_request"))
