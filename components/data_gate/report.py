"""What the data gate found: its findings, its report, and the line a stopped night ends with."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from components.data_gate import thresholds as th

# Finding kinds.
STOP = "stop"
INFO = "info"
# Checks a finding comes from (besides th.DRIFT, th.SCALE, th.NEW_VALUES, th.MISSING, th.LABEL,
# th.ROWS and th.LIVE_MODEL).
MISSING_COLUMN = "missing_column"
EMPTIED = "emptied"
TYPE = "type"
NEW_COLUMN = "new_column"
# How an accepted name reached the gate: recorded in the serving folder's history by
# `schedule.py local accept`, or passed to this run.
ACCEPTED_RECORDED = "schedule.py local accept"
ACCEPTED_FLAG = "--accept-changes"


@dataclasses.dataclass(frozen=True)
class Finding:
  """One difference between tonight's data and the live version's.

  Attributes:
    column: the column, or th.ROW_COUNT for the row count.
    check: what found it (th.DRIFT, TYPE, EMPTIED, ...).
    kind: STOP or INFO.
    text: what changed, in words, with the statistic and the threshold where there is one.
    value: the statistic, where there is one.
    threshold: the threshold it was held to.
    accepted: a STOP finding that `--accept-changes` let through.
  """

  column: str
  check: str
  kind: str
  text: str
  value: float | None = None
  threshold: float | None = None
  accepted: bool = False

  @property
  def stops(self) -> bool:
    return self.kind == STOP and not self.accepted


@dataclasses.dataclass(frozen=True)
class GateReport:
  """What the gate found.

  Attributes:
    live_version: the version compared against (None on a first night).
    findings: stopping findings first, then information.
    drift: column -> {"statistic", "value", "threshold"} for every column compared.
    rows: {"tonight", "reference"} training rows.
    accepted: the names `--accept-changes` gave (or the serving folder recorded).
    acceptances: accepted name -> who let it through and why, once per name (`acceptances`).
    compared: False when there was nothing to compare with (a first night, or a live version
      pushed without its training data), with `reason` saying which.
  """

  live_version: int | None
  findings: tuple[Finding, ...] = ()
  drift: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
  rows: Mapping[str, int | None] = dataclasses.field(default_factory=dict)
  accepted: tuple[str, ...] = ()
  acceptances: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
  compared: bool = True
  reason: str = ""
  anomalies: Any = dataclasses.field(default=None, compare=False, repr=False)  # TFDV's proto

  @property
  def passed(self) -> bool:
    return not any(f.stops for f in self.findings)

  @property
  def stopping(self) -> list[Finding]:
    return [f for f in self.findings if f.stops]

  def short(self) -> str:
    """A few words for the live table."""
    if not self.compared:
      return f"not compared: {self.reason}"
    accepted = sum(f.accepted for f in self.findings)
    if not self.passed:
      names = sorted({f.column for f in self.stopping})
      return f"stopped: {', '.join(names)} changed"
    return f"passed vs version {self.live_version}" + (
      f" ({accepted} change(s) accepted)" if accepted else ""
    )

  def to_json(self) -> dict[str, Any]:
    return {
      "passed": self.passed,
      "compared": self.compared,
      "reason": self.reason,
      "live_version": self.live_version,
      "rows": dict(self.rows),
      "accepted": list(self.accepted),
      "acceptances": {k: dict(v) for k, v in self.acceptances.items()},
      "findings": [dataclasses.asdict(f) for f in self.findings],
      "drift": {k: dict(v) for k, v in self.drift.items()},
    }

  @classmethod
  def from_json(cls, data: Mapping[str, Any]) -> GateReport:
    return cls(
      live_version=data.get("live_version"),
      findings=tuple(Finding(**f) for f in data.get("findings", [])),
      drift=data.get("drift", {}),
      rows=data.get("rows", {}),
      accepted=tuple(data.get("accepted", [])),
      acceptances=data.get("acceptances", {}),
      compared=data.get("compared", True),
      reason=data.get("reason", ""),
    )


def with_finding(report: GateReport, finding: Finding) -> GateReport:
  """The report with one more finding (marked accepted when its column was)."""
  findings = [*report.findings, mark(finding, report.accepted)]
  findings.sort(key=order_key)
  return dataclasses.replace(report, findings=tuple(findings))


def order_key(finding: Finding) -> tuple:
  return (not finding.stops, finding.kind != STOP, finding.column, finding.check)


def not_compared(reason: str, live_version: int | None = None) -> GateReport:
  """The report of a night with nothing to compare with; it passes."""
  return GateReport(live_version, compared=False, reason=reason)


def acceptances(
  accepted: Sequence[str], recorded: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, str]]:
  """Who let each accepted name through and why, once per name, in `accepted`'s order.

  Args:
    accepted: every name accepted tonight (`--accept-changes`'s, then the recorded ones).
    recorded: name -> the serving folder's acceptance of it (`history.acceptances`: reason,
      user, host, time).

  Returns:
    name -> {"via": ACCEPTED_RECORDED or ACCEPTED_FLAG, "reason", "who" (user@host), "time"};
    a name both recorded and passed to `--accept-changes` shows its recorded acceptance.
  """
  out: dict[str, dict[str, str]] = {}
  for name in accepted:
    entry = recorded.get(name)
    if entry is None:
      out[name] = {"via": ACCEPTED_FLAG, "reason": "", "who": "", "time": ""}
      continue
    user, host = entry.get("user") or "", entry.get("host") or ""
    out[name] = {
      "via": ACCEPTED_RECORDED,
      "reason": str(entry.get("reason") or ""),
      "who": f"{user}@{host}" if user and host else user or host,
      "time": str(entry.get("time") or ""),
    }
  return out


def with_acceptances(report: GateReport, recorded: Mapping[str, Mapping[str, Any]]) -> GateReport:
  """The report with who let each of its accepted names through and why (`acceptances`)."""
  return dataclasses.replace(report, acceptances=acceptances(report.accepted, recorded))


def mark(finding: Finding, accepted: Sequence[str]) -> Finding:
  if finding.kind == STOP and th.is_accepted(finding.column, accepted):
    return dataclasses.replace(finding, accepted=True)
  return finding


def pct(share: float) -> str:
  return f"{100 * share:.1f}%"


def num(value: float) -> str:
  return f"{value:.4g}"


def stop_message(report: GateReport, how_to_accept: str) -> str:
  """The one line a stopped night ends with: each column, what changed, and how to accept it."""
  stops = report.stopping
  live = (
    f"live version {report.live_version}" if report.live_version is not None else "the live model"
  )
  shown = "; ".join(f.text for f in stops[:6])
  more = f"; and {len(stops) - 6} more" if len(stops) > 6 else ""
  names = sorted({f.column for f in stops})
  if names == [th.REPEATED_DATA]:
    what, change = "repeats data a version was trained on", "repeat"
  else:
    what, change = f"differs from what {live} was trained on", "change"
  return (
    f"the data gate stopped this night, tonight's data {what}: {shown}{more}. Nothing was "
    f"trained or pushed and {live} stays live. If the {change} is deliberate, "
    f"{how_to_accept.format(columns=','.join(names))}"
  )
