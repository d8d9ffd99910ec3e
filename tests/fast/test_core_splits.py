"""The split plan and split folders (core/splits.py)."""

import pytest

from core import splits


def test_the_plan_is_train_and_eval_by_hash_buckets():
  plan = splits.plan(4, 1)
  assert plan == splits.Plan(("train", "eval"), (4, 1), None)
  assert plan.share("eval") == pytest.approx(0.2) and plan.share("train") == pytest.approx(0.8)
  assert splits.plan(4, 1, "user_id").partition_column == "user_id"
  assert splits.plan(4, 1, "").partition_column is None


def test_the_split_of_a_folder():
  assert splits.split_of_folder("Split-train") == "train"
  assert splits.split_of_folder("Split-eval/") == "eval"
  assert splits.split_of_folder("schema.pbtxt") is None
  assert splits.split_of_folder(splits.SPLIT_FOLDER_PREFIX + "x") == "x"
