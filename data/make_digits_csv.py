"""Regenerates data/digits/digits.csv from scikit-learn's bundled digits set.

The file is committed, so nothing downloads at run time; this script documents
exactly how it was produced:

    python data/make_digits_csv.py
"""

import argparse
import csv
import pathlib

from sklearn.datasets import load_digits

_DEFAULT_OUT = pathlib.Path(__file__).resolve().parent / "digits" / "digits.csv"


def write_digits_csv(path: pathlib.Path) -> int:
  """Writes the 1,797 8x8 digit images as 64 pixel columns plus a label.

  Args:
    path: Destination CSV file; parent folders are created.

  Returns:
    The number of data rows written.
  """
  digits = load_digits()
  path.parent.mkdir(parents=True, exist_ok=True)
  header = [f"pixel_{i}" for i in range(digits.data.shape[1])] + ["label"]
  with path.open("w", newline="") as f:
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(header)
    for row, label in zip(digits.data.astype(int), digits.target, strict=True):
      writer.writerow([*row.tolist(), int(label)])
  return len(digits.target)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", type=pathlib.Path, default=_DEFAULT_OUT)
  args = parser.parse_args()
  print(f"wrote {write_digits_csv(args.out)} rows to {args.out}")


if __name__ == "__main__":
  main()
