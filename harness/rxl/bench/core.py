"""``make bench-core``: the userspace cost of the cores.

Builds ``lib/userspace/bench_core.c`` against the kernel's own deal and
select (``sys/netinet/in_pcblb_deal.c``) and reports:

* instructions per lookup, callees included (``callgrind_annotate
  --inclusive=yes``: the tuple hash and the jail check are calls, as in
  the kernel), under ``valgrind --tool=callgrind`` for today's
  plain ``il_inp[h % n]`` group lookup, the patched lookup of a group
  without a map (untagged) and of a group with one (steered), both for
  the group lookup alone and for a SYN's whole lookup (an exact-match miss
  first); ratios against plain, in one run;
* the median wall time of a map rebuild for 256 members over 64
  receiving CPUs (128-CPU, two-L3 topology), scratch allocation included;
* the map's size against the budget 8 B x 16 x members + 4 B x CPUs plus
  a small header.

Targets (docs/design.md): steered <= 1.15x plain, untagged <=
1.02x, rebuild <= 20 us, map within budget.  The report says which are
met; it never fails a build.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Optional

from rxl.decide import core
from rxl.errors import UsageError, show

LOOKUPS = 20000
REBUILDS = 201
HEADER_BUDGET = 64          # "a small header", bytes
TARGETS = {"steered": 1.15, "untagged": 1.02, "rebuild_us": 20.0}


def build() -> Path:
    src = core.ROOT / "lib/userspace/bench_core.c"
    out = core.build_dir() / f"bench_core-{core.sources_digest()}"
    if out.exists() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    core.make_build_dir(out.parent)
    argv = [*core.cc_argv(), *core.CFLAGS,
            "-D_POSIX_C_SOURCE=200809L",
            "-include", str(core.ROOT / "lib/userspace/rxl_compat.h"),
            "-I", str(core.ROOT / "sys"), str(src),
            str(core.ROOT / "sys/netinet/in_pcblb_deal.c"), "-o", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise core.CoreError("building bench_core failed:\n" + proc.stderr)
    return out


def callgrind(binary: Path, n: int = LOOKUPS) -> Optional[Dict[str, float]]:
    """Instructions per call of each lookup function; None without valgrind."""
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        subprocess.run(["valgrind", "--tool=callgrind",
                        f"--callgrind-out-file={out}", str(binary),
                        "lookup", str(n)], check=True, capture_output=True)
        text = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)], check=True,
                              capture_output=True, text=True).stdout
    per: Dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s.*:(lookup_\w+|syn_\w+)\s", line)
        if m:
            per[m.group(2)] = int(m.group(1).replace(",", "")) / n
    return per


def measure() -> dict:
    binary = build()
    rebuild = json.loads(subprocess.run(
        [str(binary), "rebuild", str(REBUILDS)], check=True,
        capture_output=True, text=True).stdout)
    budget = 8 * 16 * rebuild["members"] + 4 * rebuild["ncpu"] + HEADER_BUDGET
    doc = {"rebuild": rebuild, "map_budget_bytes": budget,
           "map_within_budget": rebuild["map_bytes"] <= budget,
           "rebuild_us": rebuild["median_ns"] / 1000,
           "rebuild_met": rebuild["median_ns"] / 1000 <= TARGETS["rebuild_us"]}
    per = callgrind(binary)
    if per is None:
        doc["lookups"] = None
        return doc
    lookups = {}
    for scope, prefix in (("group", "lookup_"), ("syn", "syn_")):
        plain = per[prefix + "plain"]
        lookups[scope] = {
            "instructions": {k: per[prefix + k]
                             for k in ("plain", "untagged", "steered")},
            "ratio": {k: round(per[prefix + k] / plain, 3)
                      for k in ("untagged", "steered")},
        }
        lookups[scope]["met"] = {
            k: lookups[scope]["ratio"][k] <= TARGETS[k]
            for k in ("untagged", "steered")}
    doc["lookups"] = lookups
    return doc


def main() -> int:
    """``make bench-core`` (``python -m rxl.bench.core [--json]``): errors are one
    ``Error:`` line, 2 for an argument it does not take, 1 for a failure."""
    extra = [a for a in sys.argv[1:] if a != "--json"]
    if extra:
        print(f"Error: {show(extra[0])}: not an argument (python -m rxl.bench.core "
              "[--json])", file=sys.stderr)
        return 2
    try:
        doc = measure()
    except (core.CoreError, subprocess.CalledProcessError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except UsageError as e:  # RXL_BUILD_DIR relative or a file (core.build_dir)
        print(f"Error: {e}", file=sys.stderr)
        return e.exit_code
    if "--json" in sys.argv[1:]:
        print(json.dumps(doc, indent=2))
        return 0
    r = doc["rebuild"]
    print(f"map rebuild, {r['members']} members x {r['rx_cpus']} receiving "
          f"CPUs ({r['ncpu']} CPUs): median {doc['rebuild_us']:.1f} us "
          f"(target <= {TARGETS['rebuild_us']:.0f} us: "
          f"{'met' if doc['rebuild_met'] else 'NOT met'})")
    print(f"map size {r['map_bytes']} B, budget {doc['map_budget_bytes']} B "
          f"({'within' if doc['map_within_budget'] else 'OVER'}); "
          f"deal scratch {r['scratch_bytes']} B, freed after the rebuild")
    if doc["lookups"] is None:
        print("instruction counts: valgrind not installed "
              "(apt-get install valgrind)")
        return 0
    print(f"{'instr. per lookup, callees in':<30}{'plain':>8}{'untagged':>10}"
          f"{'steered':>9}   ratios (targets <= 1.02, <= 1.15)")
    for scope, label in (("group", "group lookup"),
                         ("syn", "SYN: exact miss + group")):
        d = doc["lookups"][scope]
        i = d["instructions"]
        rr = d["ratio"]
        print(f"{label:<30}{i['plain']:>8.1f}{i['untagged']:>10.1f}"
              f"{i['steered']:>9.1f}   {rr['untagged']:.3f} "
              f"({'met' if d['met']['untagged'] else 'not met'}), "
              f"{rr['steered']:.3f} "
              f"({'met' if d['met']['steered'] else 'not met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
