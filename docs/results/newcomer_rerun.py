#!/usr/bin/env python3
"""Re-run issue 27's own examples against the rxl of this checkout.

Each example is the command the issue names (or, where it names no command,
the call it names), run as ``timeout 15 rxl ...`` with a scratch
``RXL_WORK`` (never the lead's /work/cache). Prints a Markdown table: kind,
example, exit status, first stderr line, seconds, and whether the result is
what the issue asks for (``ok``) or not (``FAULT``). Exit status 1 when any
example is a FAULT.

    .venv/bin/python docs/results/newcomer_rerun.py > /tmp/rerun.md
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RXL = str(ROOT / ".venv" / "bin" / "rxl")
PY = str(ROOT / ".venv" / "bin" / "python")
DATA = ROOT / "tests" / "data"
CONSOLE = DATA / "console" / "synthetic-pass.log"
TIMEOUT = 15


def run(argv, env, stdin=None):
    """(exit status, stdout, stderr, seconds) of ``timeout 15 argv``."""
    t = time.monotonic()
    p = subprocess.run(["timeout", str(TIMEOUT), *argv], env=env, input=stdin,
                       capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="rxl-rerun-"))
    work = scratch / "work"
    work.mkdir()
    env = dict(os.environ, RXL_WORK=str(work))
    env.pop("RXL_BASE_URL", None)
    f = scratch  # inputs
    progs = f / "progs"
    progs.mkdir()
    (progs / "t").write_text("#!/bin/sh\n")
    (progs / "t").chmod(0o755)
    (f / "empty-progs").mkdir()
    (f / "a-file").write_text("x\n")
    (f / "not-a-key").write_text("hello\n")
    (f / "keydir").mkdir()
    # targets files
    (f / "brackets.yaml").write_text('targets:\n  v6: {kind: box, host: "[::1]"}\n')
    (f / "badkey.yaml").write_text(f"targets:\n  b: {{kind: box, host: h, key: "
                                   f"{f / 'not-a-key'}}}\n")
    (f / "dirkey.yaml").write_text(f"targets:\n  b: {{kind: box, host: h, key: "
                                   f"{f / 'keydir'}}}\n")
    (f / "mistake.yaml").write_text("targets:\n  b: {kind: box, host: 'a b'}\n")
    bomb = ["a: &a [x,x,x,x,x,x,x,x,x]"]
    for i, n in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        bomb.append(f"{n}: &{n} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},"
                    f"*{prev},*{prev}]")
    (f / "bomb.yaml").write_text("x_anchors:\n" + "".join(f"  {b}\n" for b in bomb)
                                 + "targets:\n  b: {kind: box, host: h, description: *i}\n")
    # a kcount trace that is not UTF-8, and a kernel stand-in
    (f / "binary.json").write_bytes(b"\xff\xfe\x00{}")
    (f / "kernel").write_bytes(b"\x7fELF")
    (f / "entries.json").write_text(json.dumps({"outer": "f", "entries": 3, "samples": []}))
    # consoles
    log = CONSOLE.read_text()
    fail = (DATA / "console" / "synthetic-fail.log").read_text()
    (f / "two-runs.log").write_text(log + fail.replace("BEGIN patched", "BEGIN pristine")
                                    .replace("END patched", "END pristine"))
    (f / "twice.log").write_text(log + log)
    (f / "case-after-end.log").write_text(log.replace(
        "==RXL== END patched\n", "==RXL== END patched\n==RXL== CASE "
        "/rxl/tests/so_reuseport_lb_test extra rc=0 t=1 passed\n"))
    (f / "rc1.log").write_text(log.replace("basic_ipv4 rc=0 t=12 passed",
                                           "basic_ipv4 rc=1 t=12 passed"))
    (f / "rxq-oor.log").write_text(log.replace("rxq1.cpu: 4", "rxq1.cpu: 99"))
    (f / "rxq-neg.log").write_text(log.replace("rxq1.cpu: 4", "rxq1.cpu: -4"))
    (f / "empty.log").write_text("")
    (f / "binary.log").write_bytes(bytes(range(256)) * 8)
    (f / "utf16.log").write_bytes(log.encode("utf-16"))
    (f / "junit.xml").write_text('<?xml version="1.0"?><testsuites><testsuite name="x">'
                                 '<testcase name="a"/></testsuite></testsuites>\n')
    head, _, tail = log.partition("==RXL== ATF END")
    (f / "many.log").write_text(head + "".join(
        f"==RXL== CASE /rxl/tests/p c{i} rc=0 t=1 passed\n" for i in range(200000))
        + "==RXL== ATF END" + tail)
    # inspect views (the 15 series' groups view, tests/unit/verify/test_inspect_lines.py)
    view = ("group port 8080 af inet members 2 map 32 rebuilds 3 nomap 0\n"
            "learn window_ms 10000 age_ms 4210 rolls 7\n"
            "rx 0 last 6756 cur 3301 sum 13000\nrx 4 last 6793 cur 3350 sum 13100\n"
            "member 0 tag 0 learned slots 16\nmember 1 tag 4 explicit slots 16\n"
            "cpu 0 offset 0 slots 16\ncpu 4 offset 16 slots 16\n"
            "group port 9090 af inet6 members 1 map 0 rebuilds 0 nomap 1\n"
            "member 0 tag none - slots 0\n")
    (f / "nan.view").write_text(view.replace("rx 0 last 6756", "rx 0 last nan"))
    (f / "duprx.view").write_text(view.replace("rx 4 last 6793 cur 3350 sum 13100",
                                               "rx 0 last 1 cur 1 sum 2"))
    (f / "member7.view").write_text(view.replace("member 1 tag 4", "member 7 tag 4"))
    (f / "port70000.view").write_text(view.replace("port 8080", "port 70000"))
    (f / "blame.view").write_text(view.replace("member 0 tag none - slots 0",
                                               "member 0 tag none - slots 16"))
    # learn --log
    (f / "boot.log").write_text("login: root\nFreeBSD 15.0\n")
    (f / "garbage.log").write_bytes(os.urandom(4096))
    # a damaged harness key in a second RXL_WORK
    bad_work = scratch / "badwork"
    (bad_work / "ssh").mkdir(parents=True)
    (bad_work / "ssh" / "id_ed25519").write_text("garbage\n")
    (bad_work / "ssh" / "id_ed25519.pub").write_text("garbage\n")
    env_badkey = dict(env, RXL_WORK=str(bad_work))
    env_filework = dict(env, RXL_WORK=str(f / "a-file"))

    T = "ssh://root@h"
    co = ["--check-only", "--programs", str(progs)]
    ex = []  # (kind, example, argv, env, stdin, want)

    def add(kind, what, argv, want, e=None, stdin=None):
        ex.append((kind, what, argv, e or env, stdin, want))

    # 1. unsafe or unchecked remote paths
    for wd in ("/usr/lib", "/usr/bin", "/usr/home", "/etc/ssh", "/root/.ssh"):
        add(1, f"run --target {T} --workdir {wd} --check-only",
            [RXL, "run", "--target", T, "--workdir", wd, *co], "exit 2")
    for url in ("ssh://root@host?x=1", "ssh://root@-oProxyCommand=x", "ssh://-lroot@host",
                "ssh://root@" + "h" * 300):
        add(1, f"run --target {url[:40]} --check-only", [RXL, "run", "--target", url, *co],
            "exit 2")
    add(1, 'targets.yaml host: "[::1]" (shown once bracketed)',
        [RXL, "targets", "--targets", str(f / "brackets.yaml")], "exit 0 no [[")
    # 2. --check-only misses what fails later
    add(2, "--programs missing", [RXL, "run", "--target", T, "--check-only", "--programs",
                                  str(f / "absent")], "exit 2")
    add(2, "--programs a file", [RXL, "run", "--target", T, "--check-only", "--programs",
                                 str(f / "a-file")], "exit 2")
    add(2, "--programs empty", [RXL, "run", "--target", T, "--check-only", "--programs",
                                str(f / "empty-progs")], "exit 2")
    add(2, "key: a file that is not a key", [RXL, "run", "--target", "b", "--targets",
                                             str(f / "badkey.yaml"), *co], "exit 2")
    add(2, "a corrupt harness key", [RXL, "run", "--target", T, *co], "exit 2", env_badkey)
    add(2, "--kernel ''", [RXL, "run", "--kernel", "", "--check-only"], "exit 2")
    add(2, "--base-url /nonexist", [RXL, "run", "--base-url", "/nonexist", "--check-only"],
        "exit 2")
    add(2, "--install-kernel --kernel of no kernel",
        [RXL, "run", "--target", T, "--install-kernel", "--kernel", str(f / "a-file"), *co],
        "exit 2")
    # 3. options silently ignored
    add(3, "--target guest --memory 4096", [RXL, "run", "--target", "guest", "--memory",
                                            "4096", "--dry-run"], "exit 2")
    for o in (["--memory", "4096"], ["--transport", "serial"],
              ["--pristine-kernel", str(f / "kernel")], ["--no-spread"]):
        add(3, f"ssh target {' '.join(o)[:30]}", [RXL, "run", "--target", T, *o, *co],
            "exit 2")
    # --workdir and --kyua apply to the own guest over SSH since 6d9f675 (its cases run
    # over SSH on kyua by default): they are refused where no SSH session is
    add(3, "--programs without --target", [RXL, "run", "--programs", str(progs),
                                           "--check-only"], "exit 2")
    for o in (["--workdir", "/var/tmp/x"], ["--kyua"]):
        add(3, f"{o[0]} without --target, --transport serial",
            [RXL, "run", *o, "--transport", "serial", "--check-only"], "exit 2")
        add(3, f"{o[0]} without --target (own guest over SSH: applies)",
            [RXL, "run", *o, "--check-only"], "exit 0")
    # the 15 series has no core_spread=2 (6a19d17): 1 is the value that can clash
    add(3, "spread --core-spread 1 --no-spread", [RXL, "spread", "--topology", "qemu-2s",
                                                  "--intr-cpus", "0-7", "--queues", "2",
                                                  "--core-spread", "1", "--no-spread"],
        "exit 2")
    add(3, "bench accept --client closed --spacing-ms 5",
        [RXL, "bench", "accept", "--client", "closed", "--spacing-ms", "5"], "exit 2")
    add(3, "--base-url with --src", [RXL, "run", "--base-url", str(f), "--src", str(f),
                                     "--check-only"], "exit 2")
    # 4. parsers that guess (rxl parse: helper struct3's; rxl inspect)
    for name in ("two-runs", "twice", "case-after-end", "rc1", "rxq-oor", "rxq-neg"):
        add(4, f"parse {name}.log", [RXL, "parse", str(f / f"{name}.log")], f"parse:{name}")
    for name in ("empty.log", "binary.log", "utf16.log", "junit.xml"):
        add(4, f"parse {name}", [RXL, "parse", str(f / name)], "not a console log")
    for name in ("nan", "duprx", "member7", "port70000", "blame"):
        add(4, f"inspect {name}.view", [RXL, "inspect", str(f / f"{name}.view")],
            "exit 2" if name != "blame" else "exit 2 names port 9090")
    # 5. tracebacks
    b, k = str(f / "binary.json"), str(f / "kernel")
    for cmd in (["analyze", b], ["table", "--trace", "accept-off", "pristine", b],
                ["diff", b, k, b, k], ["sites", b, "--kernel", k]):
        add(5, f"kcount {cmd[0]} on non-UTF-8", [RXL, "kcount", *cmd], "exit 2")
    add(5, "targets --key, RXL_WORK a file", [RXL, "targets", "--key"], "exit 1or2",
        env_filework)
    add(5, "targets --key, corrupt key", [RXL, "targets", "--key"], "exit 1or2", env_badkey)
    for t in ("1e400", "inf"):
        code = ("from rxl.verify.kyua import cases_from_kyua_junit as c; "
                "x = c('<testsuite><testcase classname=\"p\" name=\"a\" time=\"%s\"/>"
                "</testsuite>', '/t'); print(x[0].seconds)" % t)
        add(5, f"kyua JUnit time={t}", [PY, "-c", code], "exit 0 no traceback")
    # 6. slow on small input
    add(6, "alias bomb targets.yaml (774 bytes)", [RXL, "targets", "--targets",
                                                   str(f / "bomb.yaml")], "exit 2 fast")
    add(6, "parse 200,000 CASE lines", [RXL, "parse", str(f / "many.log")], "parse:many")
    add(6, "inspect /dev/zero", [RXL, "inspect", "/dev/zero"], "exit 2 fast")
    add(6, "YAML loader is CSafeLoader",
        [PY, "-c", "from rxl.guest import targets as t; import yaml; "
                   "assert t.BASE_LOADER is yaml.CSafeLoader; print(t.BASE_LOADER)"],
        "exit 0")
    # 7. one error surface
    add(7, "deal --nosuch (click usage error)", [RXL, "deal", "--nosuch"], "exit 2 one line")
    add(7, "targets with a mistake", [RXL, "targets", "--targets", str(f / "mistake.yaml")],
        "exit 2 Error:")
    (f / "disk.raw").write_bytes(bytes(512))  # one sector: the least rxl vm takes
    add(7, "vm --tap em0 names the option", [RXL, "vm", "--image", str(f / "disk.raw"),
                                             "--tap", "em0"], "exit 2 --tap")
    add(7, "vm --name 'no spaces' names the option", [RXL, "vm", "--image", str(f / "disk.raw"),
                                                      "--name", "no spaces"], "exit 2 --name")
    add(7, "run --target b, a bad targets file", [RXL, "run", "--targets",
                                                 str(f / "mistake.yaml"), "--target", "b",
                                                 "--check-only"], "exit 2")
    add(7, "run --target nosuchname", [RXL, "run", "--target", "nosuchname", "--check-only"],
        "exit 2")
    add(7, "run --json --dry-run prints JSON", [RXL, "run", "--json", "--dry-run", "--target",
                                                T, "--programs", str(progs)], "json")
    add(7, "run --json --check-only prints JSON", [RXL, "run", "--json", *co, "--target", T],
        "json")
    # 8. wrong words
    add(8, "deal --members 0,5+L (help says 5L)", [RXL, "deal", "--topology", "2x4x2",
                                                   "--members", "0,5+L"], "exit 2 5L")
    add(8, "kcount analyze entries: 3", [RXL, "kcount", "analyze", str(f / "entries.json")],
        "exit 2 no internals")
    add(8, "learn --log of a log without learn runs", [RXL, "learn", "--log",
                                                      str(f / "boot.log")], "exit 2 Error:")
    add(8, "learn --log of garbage", [RXL, "learn", "--log", str(f / "garbage.log")],
        "exit 2 Error:")
    add(8, "key: a directory", [RXL, "run", "--target", "b", "--targets",
                                str(f / "dirkey.yaml"), *co], "exit 2 is a directory")
    # 9. decisions on real topologies
    l2 = str(DATA / "topology" / "2pkg-l2.xml")
    add(9, "outcomes on L2 packages: cross pair remote", [RXL, "outcomes", "--topology", l2,
                                                          "--workers", "4", "--rx-cpus", "0",
                                                          "--json"], "remote")
    add(9, "spread 4 cores, two 2-queue NICs", [RXL, "spread", "--topology", "4x1x1",
                                                "--intr-cpus", "0-3", "--queues", "2,2",
                                                "--json"], "cpus 2,3")
    add(9, "spread --domain 1 --intr-cpus 0-7", [RXL, "spread", "--topology", "qemu-2s",
                                                 "--intr-cpus", "0-7", "--queues", "2",
                                                 "--domain", "1", "--json"], "domain 1 cpus")
    # 10. README says what happens
    add(10, "README eBPF deal_lines() call",
        [PY, "-c", "from rxl.decide import topology; from rxl.bench.ebpf import deal_lines; "
                   "lines, d = deal_lines(topology.load('2x4x2'), [0, 1, 2, 9]); "
                   "print(lines[:2], type(d).__name__)"], "exit 0")
    add(10, "README targets example box: run --dry-run",
        [RXL, "run", "--target", "box", "--targets", str(f / "readme.yaml"), "--dry-run",
         "--programs", str(progs)], "exit 0")
    readme = (ROOT / "README.md").read_text()
    yml = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    (f / "readme.yaml").write_text(yml)

    rows, faults = [], 0
    for kind, what, argv, e, stdin, want in ex:
        rc, out, err, secs = run(argv, e, stdin)
        verdict = judge(want, rc, out, err, secs)
        faults += verdict != "ok"
        rows.append((kind, what, rc, first_line(err) or ("(stdout) " + first_line(out)),
                     secs, verdict))
    print("| kind | example | exit | first stderr line | s | result |")
    print("|---|---|---|---|---|---|")
    for kind, what, rc, line, secs, verdict in rows:
        line = line.replace("|", "\\|")[:150]
        print(f"| {kind} | {what.replace('|', '/')} | {rc} | `{line}` | {secs:.1f} | "
              f"{verdict} |")
    print(f"\n{len(rows)} examples, {faults} not as the issue asks")
    shutil.rmtree(scratch, ignore_errors=True)
    return 1 if faults else 0


def judge(want, rc, out, err, secs):
    """``ok`` when the result is what issue 27 asks for, else ``FAULT: why``."""
    if "Traceback" in err or "Traceback" in out:
        return "FAULT: traceback"
    if rc == 124:
        return "FAULT: over 15 s"
    errs = [ln for ln in err.splitlines() if ln.startswith("Error:")]
    if want.startswith("exit 2"):
        if rc != 2:
            return f"FAULT: exit {rc}"
        if len(errs) != 1:
            return "FAULT: not one Error: line"
        extra = want[len("exit 2"):].strip()
        if extra == "fast" and secs > 10:
            return "FAULT: slow"
        if extra == "names port 9090" and "9090" not in errs[0]:
            return "FAULT: blames another group"
        if extra.startswith("--") and f"'{extra}'" not in errs[0]:
            return "FAULT: option not named"
        if extra == "5L" and "5L" not in errs[0]:
            return "FAULT: form not named"
        if extra == "is a directory" and ("no such" in errs[0] or "directory" not in errs[0]):
            return "FAULT: wrong words"
        if extra == "no internals" and any(w in errs[0] for w in ("('", "' object")):
            return "FAULT: Python internals"
        return "ok"
    if want == "exit 1or2":
        return "ok" if rc in (1, 2) and len(errs) == 1 else f"FAULT: exit {rc}"
    if want == "exit 0 no [[":
        return "ok" if rc == 0 and "[[" not in out and "::1" in out else "FAULT"
    if want.startswith("exit 0"):
        return "ok" if rc == 0 else f"FAULT: exit {rc}"
    if want == "json":
        try:
            json.loads(out)
        except ValueError:
            return "FAULT: not JSON"
        return "ok" if rc == 0 else f"FAULT: exit {rc}"
    if want == "not a console log":
        return "ok" if rc == 2 and "not a console log" in err else \
            "FAULT: struct3 (parse.py)"
    if want.startswith("parse:"):
        return parse_ok(want.split(":", 1)[1], rc, out, err)
    if want == "remote":
        try:
            pol = json.loads(out)["policies"]
        except (ValueError, KeyError):
            return "FAULT: not JSON"
        got = {n for p in pol for n, c in p["classes"].items() if c["workers"]}
        return "ok" if got == {"remote"} else f"FAULT: classed {sorted(got)}"
    if want == "cpus 2,3":
        try:
            devs = json.loads(out)["devices"]
        except (ValueError, KeyError):
            return "FAULT: no devices"
        got = [[q["cpu"] for q in d["queues"]] for d in devs]
        return "ok" if got == [[0, 1], [2, 3]] else f"FAULT: {got}"
    if want == "domain 1 cpus":
        try:
            devs = json.loads(out)["devices"]
        except (ValueError, KeyError):
            return "FAULT: no devices"
        cpus = [q["cpu"] for d in devs for q in d["queues"]]
        return "ok" if cpus and all(c >= 4 for c in cpus) else f"FAULT: {cpus}"
    return "FAULT: unjudged"


def parse_ok(name, rc, out, err):
    """rxl parse's examples (verify/parse.py, helper struct3's module)."""
    bad = "FAULT: struct3 (parse.py)"
    if name == "two-runs":
        return "ok" if "patched" in out and "pristine" in out else bad
    if name == "twice":
        return "ok" if rc != 0 or "twice" in out + err else bad
    if name == "case-after-end":
        return "ok" if "extra" not in out.split("Test cases", 1)[-1].split("RX queue")[0] \
            or "after" in out + err else bad
    if name == "rc1":
        return "ok" if "basic_ipv4  passed" not in out else bad
    if name in ("rxq-oor", "rxq-neg"):  # the line named, the run never passes
        return "ok" if rc == 2 or ("damaged" in out and "line 48" in out) else bad
    if name == "many":
        return "ok" if rc in (0, 1) else bad
    return "FAULT: unjudged"


if __name__ == "__main__":
    sys.exit(main())
