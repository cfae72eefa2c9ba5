"""libFuzzer targets of the C cores: build, run, replay, record.

Each target (``tests/fuzz/<name>.c``) is linked with the cores exactly as
the userspace library is (:func:`rxl.decide.core.source_args`: the same sources,
compat header and ``-std=c99 -Wall -Wextra -Werror``), plus
``-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all`` and
``-DINVARIANTS`` (the cores' own KASSERTs become assert()s).

* ``python -m rxl.decide.fuzz build [TARGET...]`` builds into ``$RXL_BUILD_DIR/fuzz``
  (default ``build/fuzz``) under a name carrying a hash of every input;
* ``run --seconds S`` fuzzes each target for S seconds (one process, as
  libFuzzer's ``-max_total_time``), new inputs going to
  ``build/fuzz/corpus/<target>`` with the seed corpus
  ``tests/fuzz/corpus/<target>`` read too; a finding is saved as
  ``build/fuzz/findings/<target>-crash-<sha1>`` and the run fails;
* ``replay`` runs every file of the seed corpus and of
  ``tests/fuzz/regress/<target>`` once (``make fuzz-replay``, in ``make test``);
* ``--record FILE`` merges ``{"<target>": {"executions", "findings", "edges",
  "seconds", "command"}}`` into FILE (docs/results/fuzz.json).

The compiler is ``$FUZZ_CC`` or ``clang-16`` (Debian: ``apt-get install -y
clang-16 libclang-rt-16-dev``); :func:`available` tells whether it can link
a fuzzer, so ``make test`` can skip the replay with one clear line on a
machine without it.  ``--dry-run`` prints the commands instead.

Errors: :class:`FuzzError` (one line) for a missing compiler, a failed
build, or a finding.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from rxl.decide import core
from rxl.errors import HostError, UsageError, reason

#: The targets, one C file each under tests/fuzz/.
TARGETS = ("deal", "spread", "learn")
FUZZ_DIR = core.ROOT / "tests" / "fuzz"
#: Sanitizers and the fuzzer runtime (clang's -fsanitize=fuzzer), aborting
#: on the first UBSan report so that it counts as a finding; coverage
#: feedback from the cores under sys/ only (tests/fuzz/coverage.allow), and
#: no comparison tracing: the decoders hand the cores their magic values
#: directly, and tracing cost a third of every execution (measured).
FUZZ_FLAGS = ("-g", "-fsanitize=fuzzer,address,undefined",
              "-fno-sanitize-recover=all", "-fno-sanitize-coverage=trace-cmp",
              "-DINVARIANTS",
              f"-fsanitize-coverage-allowlist={FUZZ_DIR / 'coverage.allow'}")
#: libFuzzer's -max_len for ``run``: the decoders draw past the end of the
#: input from a seeded generator, so 1 KiB describes any case.
MAX_LEN = 1024
#: Install line printed when no fuzzing compiler is found.
INSTALL = "apt-get install -y clang-16 libclang-rt-16-dev"


class FuzzError(HostError):
    """A fuzz target could not be built or run, or found a bug."""


def cc_argv() -> List[str]:
    """The fuzzing compiler: ``$FUZZ_CC`` (split like a shell), else clang-16."""
    return shlex.split(os.environ.get("FUZZ_CC", "clang-16"))


def available() -> Optional[str]:
    """None if :func:`cc_argv` can link a libFuzzer target, else why not."""
    cc = cc_argv()
    if not cc or shutil.which(cc[0]) is None:
        return f"no {cc[0] if cc else 'compiler'} ({INSTALL})"
    try:
        out = subprocess.run([*cc, "-print-file-name=libclang_rt.fuzzer-x86_64.a"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"{cc[0]}: {reason(e)}"
    if not out or not Path(out).is_file():
        return f"{cc[0]} has no libFuzzer runtime ({INSTALL})"
    return None


def source(target: str) -> Path:
    if target not in TARGETS:
        raise FuzzError(f"unknown fuzz target {target!r}: one of {', '.join(TARGETS)}")
    return FUZZ_DIR / f"{target}.c"


def _inputs(target: str) -> List[Path]:
    files = [core.ROOT / rel for rel in core.CORE_SOURCES + core.CORE_HEADERS + core.GLUE]
    return files + [FUZZ_DIR / "fuzz_common.h", FUZZ_DIR / "coverage.allow", source(target)]


def binary(target: str) -> Path:
    """Where the target for the current sources lives (built or not)."""
    h = hashlib.sha256()
    for path in _inputs(target):
        h.update(str(path).encode() + b"\0" + path.read_bytes())
    h.update(" ".join([*cc_argv(), *core.CFLAGS, *FUZZ_FLAGS]).encode())
    return core.build_dir() / "fuzz" / f"{target}-{h.hexdigest()[:12]}"


def build_argv(target: str, out: Path) -> List[str]:
    """The compiler command line of one target: the library's sources and
    flags (:func:`rxl.decide.core.source_args`) plus :data:`FUZZ_FLAGS`."""
    return [*cc_argv(), *core.CFLAGS, *FUZZ_FLAGS, *core.source_args(),
            str(source(target)), "-o", str(out)]


def build(target: str, dry_run: bool = False) -> Path:
    """Build ``target`` unless already built; return the binary's path."""
    out = binary(target)
    argv = build_argv(target, out)
    if dry_run:
        print(shlex.join(argv))
        return out
    if out.exists():
        return out
    core.make_build_dir(out.parent)
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    argv = build_argv(target, tmp)
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        log = out.with_name(out.name + ".log")
        log.write_text(shlex.join(argv) + "\n" + proc.stdout + proc.stderr)
        first = next((ln for ln in proc.stderr.splitlines() if ln.strip()),
                     f"exit status {proc.returncode}")
        raise FuzzError(f"building fuzz target {target} failed: {first} (full output: {log})")
    os.replace(tmp, out)
    return out


def corpus(target: str) -> Path:
    """The seed corpus under version control."""
    return FUZZ_DIR / "corpus" / target


def regress(target: str) -> Path:
    """Inputs that once found a bug: replayed forever."""
    return FUZZ_DIR / "regress" / target


def run_argv(target: str, bin_: Path, seconds: int, runs: int = 0,
             max_len: int = MAX_LEN) -> List[str]:
    """libFuzzer's command line: ``seconds`` (and, if given, at most ``runs``
    executions), new inputs into build/fuzz/corpus/<target>."""
    work = core.build_dir() / "fuzz" / "corpus" / target
    findings = core.build_dir() / "fuzz" / "findings"
    corpus(target).mkdir(parents=True, exist_ok=True)
    return [str(bin_), f"-max_total_time={seconds}", f"-max_len={max_len}",
            *([f"-runs={runs}"] if runs else []),
            "-print_final_stats=1", "-timeout=30", "-rss_limit_mb=2048",
            f"-artifact_prefix={findings}/{target}-", str(work), str(corpus(target))]


#: What libFuzzer, the sanitizers and the targets print for a finding.
_FINDING_RE = re.compile(r"^(==\d+==ERROR|FUZZ_FAIL |SUMMARY: |.*runtime error: )", re.M)
_EXEC_RE = re.compile(r"stat::number_of_executed_units:\s*(\d+)")
_COV_RE = re.compile(r"^#\d+\s+\w+\s+cov: (\d+)", re.M)


def parse_stats(text: str) -> Dict[str, int]:
    """Executions and edges (the last ``cov:`` figure) from libFuzzer's output."""
    ex = _EXEC_RE.findall(text)
    cov = _COV_RE.findall(text)
    return {"executions": int(ex[-1]) if ex else 0,
            "edges": int(cov[-1]) if cov else 0}


def run(target: str, seconds: int, log_dir: Path, runs: int = 0) -> Dict[str, object]:
    """Fuzz ``target`` for ``seconds`` (or ``runs`` executions, whichever
    ends first); the whole output goes to a log.

    Returns the record for fuzz.json; raises FuzzError on a finding (the
    input is under build/fuzz/findings/ and the case is in the log as a
    ``FUZZ_CASE`` JSON line).
    """
    bin_ = build(target)
    argv = run_argv(target, bin_, seconds, runs)
    for d in (Path(argv[-2]), core.build_dir() / "fuzz" / "findings", log_dir):
        d.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"fuzz-{target}.log"
    print(f"fuzz {target}: {seconds} s, log {log}", flush=True)
    t0 = time.monotonic()
    with open(log, "w") as fh:
        fh.write(shlex.join(argv) + "\n")
        fh.flush()
        proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT)
    text = log.read_text(errors="replace")
    rec: Dict[str, object] = dict(parse_stats(text))
    found = proc.returncode != 0 and _FINDING_RE.search(text) is not None
    if proc.returncode != 0 and not found:
        raise FuzzError(f"fuzz target {target}: libFuzzer failed (exit {proc.returncode}), "
                        f"no finding reported; see {log}")
    rec["findings"] = int(found)
    rec["seconds"] = round(time.monotonic() - t0)
    rec["command"] = shlex.join(argv)
    print(f"fuzz {target}: {rec['executions']} executions, {rec['edges']} edges, "
          f"{rec['findings']} findings", flush=True)
    if proc.returncode != 0:
        raise FuzzError(f"fuzz target {target} found a bug (exit {proc.returncode}); "
                        f"see {log} and {core.build_dir() / 'fuzz' / 'findings'}")
    return rec


def replay(target: str, dry_run: bool = False) -> int:
    """Run every seed and regression input once; return how many."""
    files = sorted(p for d in (corpus(target), regress(target)) if d.is_dir()
                   for p in d.iterdir() if p.is_file())
    bin_ = build(target, dry_run=dry_run)
    argv = [str(bin_), *map(str, files)]
    if dry_run:
        print(shlex.join(argv[:4]) + (" ..." if len(argv) > 4 else ""))
        return len(files)
    if not files:
        raise FuzzError(f"fuzz target {target}: no seed corpus under {corpus(target)}")
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise FuzzError(f"fuzz target {target}: a corpus input fails:\n{tail}")
    return len(files)


def case(target: str, path: Path) -> dict:
    """The case an input decodes to, as the target prints it (one
    ``FUZZ_CASE`` JSON line, with ``RXL_FUZZ_PRINT`` set): what
    tests/fuzz/cases/*.json hold for the property tests to replay."""
    proc = subprocess.run([str(build(target)), str(path)], capture_output=True, text=True,
                          env=dict(os.environ, RXL_FUZZ_PRINT="1"))
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.startswith("FUZZ_CASE "):
            return json.loads(line[len("FUZZ_CASE "):])
    raise FuzzError(f"fuzz target {target} printed no case for {path}")


def merge(target: str) -> int:
    """Add to the seed corpus the inputs of build/fuzz/corpus/<target> that
    reach coverage the seeds do not (libFuzzer's ``-merge=1``); return the
    number of seed files."""
    seeds = corpus(target)
    seeds.mkdir(parents=True, exist_ok=True)
    work = core.build_dir() / "fuzz" / "corpus" / target
    work.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([str(build(target)), "-merge=1", f"-max_len={MAX_LEN}",
                           str(seeds), str(work)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise FuzzError(f"merging the corpus of {target} failed:\n{proc.stderr[-2000:]}")
    return sum(1 for p in seeds.iterdir() if p.is_file())


def record(path: Path, results: Dict[str, Dict[str, object]]) -> None:
    """Merge ``results`` into the JSON file at ``path``."""
    old = json.loads(path.read_text()) if path.is_file() else {}
    old.update(results)
    path.write_text(json.dumps(old, indent=2, sort_keys=True) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m rxl.decide.fuzz build|run|replay|merge|case [--seconds S] [--runs N] [--record FILE]
    [--skip-missing] [--dry-run] [TARGET...]``."""

    try:
        core.build_dir()  # RXL_BUILD_DIR relative or a file: one line, before anything
    except UsageError as e:
        print(f"rxl fuzz: {e}", file=sys.stderr)
        return e.exit_code
    ap = argparse.ArgumentParser(prog="python -m rxl.decide.fuzz")
    ap.add_argument("action", choices=("build", "run", "replay", "merge", "case"))
    ap.add_argument("targets", nargs="*", default=list(TARGETS))
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--runs", type=int, default=0,
                    help="stop after this many executions (0: seconds only)")
    ap.add_argument("--record", type=Path)
    ap.add_argument("--log-dir", type=Path, default=core.build_dir() / "fuzz" / "logs")
    ap.add_argument("--skip-missing", action="store_true",
                    help="exit 0 with a message when no fuzzing compiler exists")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_intermixed_args(argv)
    why = available()
    if why is not None and not args.dry_run:
        if args.skip_missing:
            print(f"fuzz {args.action}: SKIPPED, {why}")
            return 0
        print(f"rxl fuzz: {why}", file=sys.stderr)
        return 1
    try:
        if args.action == "case":
            if len(args.targets) < 2:
                raise FuzzError("usage: python -m rxl.decide.fuzz case TARGET INPUT...")
            for f in args.targets[1:]:
                print(json.dumps(case(args.targets[0], Path(f))))
            return 0
        results = {}
        for t in args.targets:
            if args.action == "build":
                print(build(t, dry_run=args.dry_run))
            elif args.action == "merge":
                print(f"fuzz merge {t}: {merge(t)} seed inputs in {corpus(t)}")
            elif args.action == "replay":
                n = replay(t, dry_run=args.dry_run)
                print(f"fuzz replay {t}: {n} inputs, no finding")
            elif args.dry_run:
                print(shlex.join(run_argv(t, build(t, dry_run=True), args.seconds,
                                          args.runs)))
            else:
                results[t] = run(t, args.seconds, args.log_dir, args.runs)
        if args.record and results:
            record(args.record, results)
    except FuzzError as e:
        print(f"rxl fuzz: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
