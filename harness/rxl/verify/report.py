"""Results -> JSON, JUnit XML and a human table. Pure: strings in, strings out.

Input is an ordered mapping ``label -> RunResult`` (from :mod:`rxl.verify.parse`),
one entry per guest boot, e.g. ``{"patched": ..., "pristine": ...}``; labels
become JUnit test suites and table columns.

Verdict (``rxl run``'s exit status), see :func:`verdict`:
  * every *new* case (the series' own ATF programs) passes on the patched
    run and is run and fails on the pristine run;
  * every *base* case (FreeBSD's own, e.g. ``so_reuseport_lb_test``) passes
    on both;
  * a run that should hold cases holds some;
  * every run booted with core_spread places its RX queues as commit 1's
    rules say (:mod:`rxl.verify.placement`);
  * every run completed (no panic, no truncated log).

Results fail closed, as Linux KUnit's ``kunit_json.py`` does: a case is a
success only when its status says so (:data:`JUNIT_RESULT`: ``passed``; a
skip for ``skipped`` and ``expected_failure``); any other status, one this
module has never heard of included, is a failure; and a run that completed
without a single case is not an empty, green suite but a ``NO_TESTS`` error.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from rxl.decide.cpugroup import FLAG_NAMES, Group
from rxl.errors import counted
from rxl.verify import placement
from rxl.verify.parse import CaseResult, RunResult

#: JUnit element per case status (:data:`rxl.verify.parse.CASE_STATUSES`, every one):
#: None for a pass.  A status not in the table is a ``failure`` (:func:`junit_result`).
JUNIT_RESULT: Dict[str, Optional[str]] = {
    "passed": None, "skipped": "skipped", "expected_failure": "skipped",
    "failed": "failure", "broken": "error", "timeout": "error", "crashed": "error"}
#: The test case a run that completed without cases gets (KUnit's NO_TESTS).
NO_TESTS = "NO_TESTS"


def junit_result(status: str) -> Optional[str]:
    """The JUnit element of a case of ``status``: None (passed), ``skipped``,
    ``error`` or ``failure``; a status not in :data:`JUNIT_RESULT` fails."""
    return JUNIT_RESULT.get(status, "failure")


@dataclass
class Verdict:
    """``ok`` is the exit-0 condition; ``reasons`` lists every unmet rule."""

    ok: bool
    reasons: List[str] = field(default_factory=list)


def _case_map(run: RunResult) -> Dict[str, CaseResult]:
    return {c.name: c for c in run.cases}


def _prog_of(name: str) -> str:
    return name.split(":", 1)[0]


def verdict(runs: Mapping[str, RunResult], *, patched: str = "patched",
            pristine: Optional[str] = "pristine", spread: Optional[str] = None,
            new_programs: Iterable[str] = (), base_programs: Iterable[str] = (),
            placements: Optional[Mapping[str, int]] = None,
            need_cases: Optional[Iterable[str]] = None) -> Verdict:
    """Apply ``rxl run``'s pass rule to ``runs``.

    ``new_programs`` / ``base_programs``: program basenames (e.g.
    ``so_reuseport_lb_test``). A label given but missing from ``runs`` is a
    reason, as is a run without cases. ``spread=None`` skips the placement
    rule; ``pristine=None`` skips the must-fail-on-pristine half.
    ``placements`` maps boot labels to the core_spread they were booted
    with (``spread`` alone stands for ``{spread: 1}``); each such run must
    keep :func:`rxl.verify.placement.check`'s rules.  ``need_cases``: the
    runs that must hold cases (default: ``patched`` and ``pristine``); a
    completed one without any is a reason.  On the pristine run every new
    case must have run and failed, every base case must have passed: a case
    the pristine run does not hold is a reason, never a silent pass.
    """
    placements = dict(placements or {})
    if spread is not None:
        placements.setdefault(spread, 1)
    reasons: List[str] = []
    new_p, base_p = set(new_programs), set(base_programs)
    for label in (patched, pristine, *placements):
        if label is None:
            continue
        if label not in runs:
            reasons.append(f"{label}: no run")
    for label, run in runs.items():
        if run.outcome != "completed":
            reasons.append(f"{label}: run {run.outcome}")
    pat = _case_map(runs[patched]) if patched in runs else {}
    pri = _case_map(runs[pristine]) if pristine in runs else {}
    needed = [patched, pristine] if need_cases is None else list(need_cases)
    for label in needed:
        if label in runs and runs[label].outcome == "completed" and not runs[label].cases:
            reasons.append(f"{label}: no test cases ran")
    for name, c in sorted(pat.items()):
        prog = _prog_of(name)
        if prog in new_p:
            if c.status != "passed":
                reasons.append(f"{name}: {c.status} on {patched}, must pass")
            if pristine is not None and pristine in runs:
                p = pri.get(name)
                if p is None:
                    reasons.append(f"{name}: not run on {pristine}, must fail there")
                elif p.status == "passed":
                    reasons.append(f"{name}: passed on {pristine}, must fail")
        elif prog in base_p:
            if c.status != "passed":
                reasons.append(f"{name}: {c.status} on {patched}, must pass")
            if pristine is not None and pristine in runs and name not in pri:
                reasons.append(f"{name}: not run on {pristine}, must pass there")
    # A case some boot listed but the patched boot never reached (it died
    # before listing that program) is a failure too, never silently absent.
    if patched in runs:
        seen = {c.name for r in runs.values() for c in r.cases}
        for name in sorted(seen - set(pat)):
            if _prog_of(name) in new_p | base_p:
                reasons.append(f"{name}: not run on {patched}")
    if pristine is not None and pristine in runs:
        for name, c in sorted(pri.items()):
            if _prog_of(name) in base_p and c.status != "passed":
                reasons.append(f"{name}: {c.status} on {pristine}, must pass")
    for label, value in placements.items():
        if label in runs:
            reasons += placement.check(label, runs[label], value)
    return Verdict(not reasons, reasons)


def to_json(runs: Mapping[str, RunResult], *, stages: Sequence[dict] = (),
            verdict_: Optional[Verdict] = None, indent: int = 2) -> str:
    """JSON text: ``{"runs": {label: RunResult.to_dict()}, "placement": {label:
    rxl.verify.placement.explain()}, "stages": [...], "verdict": ...}``."""
    doc = {"runs": {k: v.to_dict() for k, v in runs.items()},
           "placement": {k: placement.explain(v, placement.spread_value(v) or 0)
                         for k, v in runs.items() if v.rxq},
           "stages": list(stages)}
    if verdict_ is not None:
        doc["verdict"] = {"ok": verdict_.ok, "reasons": verdict_.reasons}
    return json.dumps(doc, indent=indent, sort_keys=False, default=str)


def to_junit(runs: Mapping[str, RunResult], need_cases: Optional[Iterable[str]] = None) -> str:
    """JUnit XML text: one ``<testsuite name=label>`` per run, one ``<testcase>`` per case.

    A run that did not complete gets an extra ``<testcase name="boot">`` in
    error, so a truncated or panicked boot can never look green; a completed
    run of ``need_cases`` (default: every run) without a case gets a
    ``<testcase name="NO_TESTS">`` in error; a case is a pass only when its
    status is ``passed`` (:func:`junit_result`).
    """
    needed = set(runs if need_cases is None else need_cases)
    suites = ET.Element("testsuites")
    for label, run in runs.items():
        cases = list(run.cases)
        kinds = [junit_result(c.status) for c in cases]
        fails = kinds.count("failure")
        errors = kinds.count("error")
        skipped = kinds.count("skipped")
        boot_bad = run.outcome != "completed"
        no_tests = not boot_bad and not cases and label in needed
        extra = 1 if boot_bad or no_tests else 0
        suite = ET.SubElement(suites, "testsuite", {
            "name": label, "tests": str(len(cases) + extra),
            "failures": str(fails), "errors": str(errors + extra),
            "skipped": str(skipped)})
        if run.notes:  # what ran where: target, kyua, kernel switch
            props = ET.SubElement(suite, "properties")
            for note in run.notes:
                ET.SubElement(props, "property", {"name": "note", "value": note})
        if boot_bad:
            tc = ET.SubElement(suite, "testcase", {"classname": label, "name": "boot"})
            msg = f"guest {run.outcome}"
            detail = "\n".join(run.panic_lines or [run.last_line])
            ET.SubElement(tc, "error", {"message": msg}).text = detail
        if no_tests:
            tc = ET.SubElement(suite, "testcase", {"classname": label, "name": NO_TESTS})
            ET.SubElement(tc, "error", {"message": "the run completed without a test case"})
        for c, kind in zip(cases, kinds):
            tc = ET.SubElement(suite, "testcase", {
                "classname": f"{label}.{_prog_of(c.name)}", "name": c.case,
                "time": str(c.seconds if c.seconds is not None else 0)})
            if kind:
                ET.SubElement(tc, kind, {"message": f"{c.status}: {c.reason}".strip(": ")})
    ET.indent(suites) if hasattr(ET, "indent") else None
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _fmt_rows(rows: List[List[str]]) -> str:
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, r in enumerate(rows):
        out.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _topo_lines(g: Group, depth: int = 0) -> List[str]:
    flags = ",".join(n for n, bit in FLAG_NAMES.items() if g.flags & bit) or "-"
    cpus = ",".join(str(c) for c in g.cpus)
    # topology_spec numbers levels from 1 at the root; g.level is the cache level.
    lines = [f"{'  ' * depth}level {depth + 1} cache L{g.level} flags {flags}: cpus {cpus}"]
    for k in g.children:
        lines += _topo_lines(k, depth + 1)
    return lines


def table(runs: Mapping[str, RunResult], verdict_: Optional[Verdict] = None,
          fallbacks: Optional[Mapping[str, str]] = None) -> str:
    """Human-readable text: cases x runs, rxq placement per socket, topology, verdict.

    ``fallbacks``: boot label -> why that boot ran on the serial console instead
    of over SSH (rxl.verify.sshrun), printed in full under the runs."""
    labels = list(runs)
    out: List[str] = []
    rows = [["run", "outcome", "cases", "passed", "notes"]]
    for label in labels:
        r = runs[label]
        passed = sum(1 for c in r.cases if c.status == "passed")
        note = r.panic_lines[0] if r.panic_lines else (r.notes[0] if r.notes else "")
        rows.append([label, r.outcome, str(len(r.cases)), str(passed), note[:60]])
    out += ["Runs", _fmt_rows(rows), ""]
    notes = [(label, n) for label in labels for n in runs[label].notes]
    if notes:  # in full: a target's notes say where and how the cases ran
        out += ["Notes"] + [f"  {label}: {n}" for label, n in notes] + [""]
    if fallbacks:
        out += ["Transport: over SSH, except"]
        out += [f"  {label}: {why}" for label, why in fallbacks.items()] + [""]

    names = list(dict.fromkeys(c.name for label in labels for c in runs[label].cases))
    if names:
        rows = [["case"] + labels]
        maps = {label: _case_map(runs[label]) for label in labels}
        for name in names:
            row = [name]
            for label in labels:
                c = maps[label].get(name)
                row.append(c.status if c else "-")
            rows.append(row)
        out += ["Test cases", _fmt_rows(rows), ""]

    rows = [["run", "core_spread", "rx queue", "cpu", "L3 group", "domain"]]
    for label in labels:
        rows += placement.rows(label, runs[label])
    if len(rows) > 1:
        out += ["RX queue placement", _fmt_rows(rows)]
        for label in labels:
            out += placement.summary(label, runs[label],
                                     placement.spread_value(runs[label]) or 0)
        out += [""]

    shown = set()
    for label in labels:
        r = runs[label]
        if r.topology is None:
            continue
        key = r.topology_xml
        if key in shown:
            continue
        shown.add(key)
        out += [f"Guest topology ({label}): {counted(len(r.sockets), 'top-level group')} "
                + " | ".join(",".join(map(str, s)) for s in r.sockets)]
        out += _topo_lines(r.topology) + [""]

    if verdict_ is not None:
        out.append("Verdict: " + ("PASS" if verdict_.ok else "FAIL"))
        out += [f"  - {why}" for why in verdict_.reasons]
    return "\n".join(out).rstrip() + "\n"
