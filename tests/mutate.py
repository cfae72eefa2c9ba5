#!/usr/bin/env python3
"""A small mutation pass: can the tests tell a broken module from the real one?

Each mutant changes one spot of one module (Python's ``ast`` finds the
spots; the text is edited in place, so every other line keeps its number):

    cmp     a comparison flipped: < <=, > >=, == !=, in / not in, is / is not
    arith   + and - swapped (also += and -=)
    bool    ``and`` and ``or`` swapped
    const   an integer constant plus or minus 1
    bconst  True and False swapped
    return  ``return X`` as ``return None``, or ``return not X`` for a truth value
    delete  one statement replaced by ``pass`` (docstrings excepted)

A mutant runs only the tests that import its module (found by reading each
test file's imports; a command's modules also get the test files that run
the command through ``rxl.cli.main``, :data:`BY_COMMAND`), in a scratch copy
of the tree (one per worker under ``--scratch``), so the working tree is
never left mutated: ``pytest -x -q -p no:cacheprovider`` under ``nice -n 19``
with a timeout of ``--timeout-factor`` times the unmutated run's time.
A mutant is *caught* when the tests fail or time out, *survived* when they
pass, and not counted when it does not compile.

    python tests/mutate.py --list                     the mutants, counted per module
    python tests/mutate.py --sample 600 --out F.json  a uniform sample (seeded), run
    python tests/mutate.py --only ID[,ID...]          these mutants again (after a new test)
    python tests/mutate.py --survivors-of F.json      an earlier pass's survivors again

Exit status 0 when it ran (whatever the score), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
#: The modules of the pass (issue 26: decide/, verify/parse.py, verify/report.py).
MODULES = tuple(sorted(str(p.relative_to(ROOT)) for p in (ROOT / "harness/rxl/decide").glob("*.py")
                       if p.name != "__init__.py")) + (
    "harness/rxl/verify/parse.py", "harness/rxl/verify/report.py")
#: Modules the commands reach through rxl.cli.main: their tests are also the
#: test files that run those commands.
BY_COMMAND = {"rxl.decide.cli": ("deal", "spread", "outcomes"),
              "rxl.decide.report": ("deal", "spread", "outcomes")}
#: What the scratch copies leave out.
SKIP = {".git", ".venv", ".hypothesis", "__pycache__", ".pytest_cache"}

_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
        ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
        ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add}
_BOOL = {ast.And: ast.Or, ast.Or: ast.And}


@dataclass
class Mutant:
    """One change: ``text`` replaces the module's characters from (line, col)
    to (end_line, end_col) (lines from 1, columns in characters)."""

    id: str
    module: str
    op: str
    line: int
    col: int
    end_line: int
    end_col: int
    text: str
    was: str


def _module_name(rel: str) -> str:
    return rel.removeprefix("harness/").removesuffix(".py").replace("/", ".")


def _segment(lines: Sequence[str], node: ast.AST) -> str:
    a, b = node.lineno - 1, node.end_lineno - 1
    if a == b:
        return lines[a][node.col_offset:node.end_col_offset]
    return "\n".join([lines[a][node.col_offset:]] + list(lines[a + 1:b])
                     + [lines[b][:node.end_col_offset]])


def _expr(node: ast.AST, span: ast.AST) -> str:
    """``node`` as text for ``span``'s place, parenthesised, as many lines as it."""
    return "(" + ast.unparse(node) + "\n" * (span.end_lineno - span.lineno) + ")"


def _docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
        and isinstance(node.value.value, str)


def _truth(node: ast.AST) -> bool:
    return isinstance(node, (ast.Compare, ast.BoolOp)) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)) or (
        isinstance(node, ast.Constant) and isinstance(node.value, bool))


def _main_guard(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)


def sites(rel: str) -> Iterator[Tuple[str, ast.AST, str, ast.AST]]:
    """(op, the node replaced, its replacement text, span) for every spot of
    module ``rel``, in source order; nothing under ``if __name__ ==``."""
    src = (ROOT / rel).read_text()
    tree = ast.parse(src)
    skip = {id(n) for top in tree.body if _main_guard(top) for n in ast.walk(top)}
    annotations = set()
    for n in ast.walk(tree):
        for ann in ([n.annotation] if isinstance(n, (ast.AnnAssign, ast.arg)) and n.annotation
                    else [n.returns] if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and n.returns else []):
            annotations.update(id(a) for a in ast.walk(ann))
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in annotations or not hasattr(node, "lineno"):
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                new = ast.Compare(node.left, list(node.ops), node.comparators)
                new.ops[i] = _CMP[type(op)]()
                yield "cmp", node, _expr(new, node), node
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            new = ast.BinOp(node.left, _ARITH[type(node.op)](), node.right)
            yield "arith", node, _expr(new, node), node
        elif isinstance(node, ast.AugAssign) and type(node.op) in _ARITH:
            new = ast.AugAssign(node.target, _ARITH[type(node.op)](), node.value)
            yield "arith", node, ast.unparse(new) + "\n" * (node.end_lineno - node.lineno), node
        elif isinstance(node, ast.BoolOp):
            new = ast.BoolOp(_BOOL[type(node.op)](), node.values)
            yield "bool", node, _expr(new, node), node
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            for d in (1, -1):
                yield "const", node, f"({node.value + d})", node
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield "bconst", node, f"{not node.value}", node
        if isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            v = node.value
            text = _expr(ast.UnaryOp(ast.Not(), v), v) if _truth(v) else \
                "None" + "\n" * (v.end_lineno - v.lineno)
            yield "return", v, text, v
        if isinstance(node, ast.stmt) and not _docstring(node) and not isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import,
                       ast.ImportFrom, ast.Pass, ast.Global, ast.Nonlocal)):
            yield "delete", node, "pass" + "\n" * (node.end_lineno - node.lineno), node


def mutants(modules: Sequence[str] = MODULES) -> List[Mutant]:
    """Every mutant of ``modules``, ids ``<module stem>:<n>`` in source order."""
    out = []
    for rel in modules:
        lines = (ROOT / rel).read_text().splitlines()
        found = sorted(sites(rel), key=lambda s: (s[3].lineno, s[3].col_offset, s[0], s[2]))
        stem = _module_name(rel).removeprefix("rxl.")
        for n, (op, node, text, span) in enumerate(found):
            out.append(Mutant(f"{stem}:{n}", rel, op, span.lineno, span.col_offset,
                              span.end_lineno, span.end_col_offset, text,
                              _segment(lines, span)[:120]))
    return out


def apply(m: Mutant, src: str) -> str:
    """``src`` (the module's text) with ``m``'s change."""
    lines = src.splitlines(keepends=True)
    offs = [0]
    for ln in lines:
        offs.append(offs[-1] + len(ln))
    a = offs[m.line - 1] + m.col
    b = offs[m.end_line - 1] + m.end_col
    return src[:a] + m.text + src[b:]


def tests_of(rel: str) -> List[str]:
    """The test files that import module ``rel`` (or run its commands, :data:`BY_COMMAND`)."""
    name = _module_name(rel)
    pkg, _, leaf = name.rpartition(".")
    out = []
    for path in sorted((ROOT / "tests/unit").rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(
                    a.name == name or a.name.startswith(name + ".") for a in node.names):
                break
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module == name or (node.module == pkg
                                            and any(a.name == leaf for a in node.names))):
                break
        else:
            continue
        out.append(str(path.relative_to(ROOT)))
    if name in BY_COMMAND:
        # an argument list that starts with the command: invoke(main, ["deal", ...]),
        # run("deal", ...), [RXL, "spread", ...], in a file that imports rxl.cli.main
        words = "|".join(BY_COMMAND[name])
        pat = re.compile(r"[\[(]\s*(?:\w+,\s*)?[\"'](?:" + words + r")[\"']\s*[,\])]")
        out = sorted(set(out) | {
            str(p.relative_to(ROOT)) for p in (ROOT / "tests/unit").rglob("test_*.py")
            if "rxl.cli.main" in p.read_text() and pat.search(p.read_text())})
    return out


def scratch_copy(dest: Path) -> Path:
    """A fresh copy of the tree (no .git, no .venv) at ``dest``: a pass cut short
    may have left a mutant in the last one."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(ROOT, dest, ignore=lambda d, names: [n for n in names if n in SKIP])
    return dest


def pytest_argv(tests: Sequence[str]) -> List[str]:
    return ["nice", "-n", "19", sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
            "-p", "no:randomly", *tests]


def run_tests(tree: Path, tests: Sequence[str], timeout: Optional[float],
              profile: str) -> Tuple[str, float]:
    """``tests`` in ``tree`` under hypothesis profile ``profile`` (tests/unit/conftest.py):
    ("passed" | "failed" | "timeout", seconds).  A timed-out run's process group is killed."""
    env = dict(os.environ, PYTHONPATH=str(tree / "harness"), RXL_BUILD_DIR=str(tree / "build"),
               PYTHONDONTWRITEBYTECODE="1", RXL_HYPOTHESIS=profile)
    t0 = time.monotonic()
    p = subprocess.Popen(pytest_argv(tests), cwd=tree, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return "timeout", time.monotonic() - t0
    return ("passed" if rc == 0 else "failed"), time.monotonic() - t0


def run_one(m: Mutant, tree: Path, tests: Sequence[str], timeout: float,
            profile: str) -> dict:
    path = tree / m.module
    orig = (ROOT / m.module).read_text()
    new = apply(m, orig)
    try:
        compile(new, m.module, "exec")
    except SyntaxError as exc:
        return dict(asdict(m), result="invalid", why=str(exc), seconds=0.0)
    path.write_text(new)
    try:
        result, secs = run_tests(tree, tests, timeout, profile)
    finally:
        path.write_text(orig)
    caught = {"failed": "caught", "timeout": "timeout", "passed": "survived"}[result]
    return dict(asdict(m), result=caught, seconds=round(secs, 1))


def summary(results: Sequence[dict]) -> Dict[str, Dict[str, int]]:
    """Per module: mutants (compiled), caught, timeout, survived, invalid."""
    per: Dict[str, Dict[str, int]] = {}
    for r in results:
        d = per.setdefault(r["module"], {"mutants": 0, "caught": 0, "timeout": 0,
                                         "survived": 0, "invalid": 0})
        d[r["result"]] += 1
        d["mutants"] += r["result"] != "invalid"
    return per


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", default=",".join(MODULES),
                    help="comma-separated module paths (default: the pass's)")
    ap.add_argument("--skip", default="", help="comma-separated module paths left out")
    ap.add_argument("--sample", type=int, default=0, help="run this many, uniformly (0: all)")
    ap.add_argument("--seed", type=int, default=26, help="the sample's seed")
    ap.add_argument("--only", default="", help="comma-separated mutant ids to run")
    ap.add_argument("--survivors-of", default="", metavar="JSON",
                    help="run the mutants that survived in an earlier --out, found by what "
                         "they change (module, operator, old and new text), not by id")
    ap.add_argument("--tests", default="",
                    help="comma-separated test files run for every mutant instead of the "
                         "module's importers (e.g. the new tests, to see which kill what)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout-factor", type=float, default=4.0)
    ap.add_argument("--scratch", default="/tmp/rxl-mutate")
    ap.add_argument("--profile", default="dev",
                    help="hypothesis profile of the pass (tests/unit/conftest.py)")
    ap.add_argument("--recheck", action="store_true",
                    help="run the survivors again under the ci profile (1,000 examples)")
    ap.add_argument("--out", default="", help="write the results as JSON here")
    ap.add_argument("--list", action="store_true", help="count the mutants; run nothing")
    a = ap.parse_args(argv)
    mods = [m for m in a.modules.split(",") if m and m not in a.skip.split(",")]
    bad = [m for m in mods if not (ROOT / m).is_file()]
    if bad or a.workers < 1 or a.sample < 0 or a.timeout_factor <= 1:
        print(f"Error: bad arguments: {', '.join(bad) or 'workers, sample or timeout factor'}",
              file=sys.stderr)
        return 2
    every = mutants(mods)
    tests = {m: a.tests.split(",") if a.tests else tests_of(m) for m in mods}
    if a.list:
        for m in mods:
            n = sum(x.module == m for x in every)
            print(f"{m}: {n} mutants, {len(tests[m])} test files")
        print(f"total: {len(every)}")
        return 0
    if a.survivors_of:
        old = json.loads(Path(a.survivors_of).read_text())["mutants"]
        picked = set()
        for r in old:
            if r["result"] != "survived":
                continue
            same = [m for m in every if (m.module, m.op, m.was, m.text)
                    == (r["module"], r["op"], r["was"], r["text"])]
            if same:  # the code may have moved a few lines since: the nearest one
                picked.add(min(same, key=lambda m: abs(m.line - r["line"])).id)
        chosen = [m for m in every if m.id in picked]
    elif a.only:
        ids = set(a.only.split(","))
        chosen = [m for m in every if m.id in ids]
    elif a.sample and a.sample < len(every):
        chosen = sorted(random.Random(a.seed).sample(every, a.sample),
                        key=lambda m: every.index(m))
    else:
        chosen = every
    trees = [scratch_copy(Path(a.scratch) / f"w{i}") for i in range(a.workers)]
    base: Dict[str, float] = {}
    for m in sorted({c.module for c in chosen}):
        if not tests[m]:
            base[m] = 0.0
            continue
        result, secs = run_tests(trees[0], tests[m], None, a.profile)
        if result != "passed":
            print(f"Error: {m}'s tests fail unmutated ({' '.join(tests[m])})", file=sys.stderr)
            return 1
        base[m] = secs
        print(f"baseline {m}: {secs:.1f} s, {len(tests[m])} test files", flush=True)
    t0 = time.monotonic()
    results: List[dict] = []
    free = list(trees)

    def work(m: Mutant, profile: str = a.profile) -> dict:
        tree = free.pop()
        try:
            if not tests[m.module]:
                return dict(asdict(m), result="survived", why="no test imports it", seconds=0.0)
            factor = a.timeout_factor * (10 if profile != a.profile else 1)
            return run_one(m, tree, tests[m.module], max(30.0, factor * base[m.module]),
                           profile)
        finally:
            free.append(tree)
    def save(note: str) -> None:
        if a.out:
            doc = {"command": " ".join(["python", "tests/mutate.py", *(sys.argv[1:] if argv is None
                                                                     else argv)]),
                   "state": note, "population": {m: sum(x.module == m for x in every)
                                                 for m in mods},
                   "sample": len(chosen), "seed": a.seed, "profile": a.profile,
                   "wall_seconds": round(time.monotonic() - t0), "tests": tests,
                   "baseline_seconds": base, "per_module": summary(results),
                   "mutants": results}
            Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    with ThreadPoolExecutor(a.workers) as pool:
        for n, r in enumerate(pool.map(work, chosen), 1):
            results.append(r)
            save(f"{n} of {len(chosen)} run")
            if r["result"] == "survived":
                print(f"  survived {r['id']} line {r['line']} {r['op']}: {r['was']!r} -> "
                      f"{r['text'].strip()!r}", flush=True)
            if n % 25 == 0:
                print(f"{n}/{len(chosen)} in {time.monotonic() - t0:.0f} s", flush=True)
    save("done")
    if a.recheck:  # what survived 100 examples may not survive make test's 1,000
        again = [Mutant(**{k: r[k] for k in Mutant.__dataclass_fields__})
                 for r in results if r["result"] == "survived" and tests[r["module"]]]
        print(f"{len(again)} survivors again under the ci profile", flush=True)
        with ThreadPoolExecutor(a.workers) as pool:
            redo = {r["id"]: r for r in pool.map(lambda m: work(m, "ci"), again)}
        for r in results:
            if r["id"] in redo:
                r["dev_result"] = r["result"]
                r["result"] = redo[r["id"]]["result"]
                r["ci_seconds"] = redo[r["id"]]["seconds"]
                if r["result"] != "survived":
                    print(f"  caught under ci: {r['id']}", flush=True)
    for m, d in sorted(summary(results).items()):
        print(f"{m}: {d['caught'] + d['timeout']}/{d['mutants']} caught"
              f" ({d['timeout']} by timeout), {d['survived']} survived")
    save("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
