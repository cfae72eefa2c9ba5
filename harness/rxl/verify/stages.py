"""The stages of ``rxl run``: one function each, the same signature, one record type.

series -> build -> world -> image -> boot -> parse -> report.  Each stage
is ``stage(opts, state) -> StageRecord``: it reads the request
(:class:`~rxl.verify.job.RunOptions`) and what earlier stages left in
:class:`~rxl.verify.job.RunState`, adds its own products there, and
returns its :class:`~rxl.verify.job.StageRecord` or raises
:class:`~rxl.verify.job.StageFailed` with a one-line message naming the
log to read.  With ``opts.dry_run`` a stage only plans: it returns status
``planned`` with the commands it would run.  Timing, stage logs and the
order are :mod:`rxl.verify.pipeline`'s.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from rxl.verify import parse as parse_mod
from rxl.verify import report as report_mod
from rxl.verify.job import (BASE_PROGRAMS, SPREAD_BOOTS, RunOptions, RunState, StageFailed,
                            StageRecord, boots, guest_config)
from rxl.verify.kernels import (build_timings, git_out, kernel_cached, pristine_checkout,
                                series_base, write_kernel_stamp)


def quiet(echo: Callable[[str], None]) -> Callable[[str], None]:
    """``echo`` without make's ``--- target ---`` banner lines."""
    def out(line: str) -> None:
        if "] ---" not in line:
            echo(line)
    return out


def series(opts: RunOptions, st: RunState) -> StageRecord:
    """The tree of the patched kernel (rxl.tree.base.resolve): ``--src`` as it
    is when the series is applied there, else a work clone with the series
    applied, or (no ``--src``) the base fetched first, which is then also the
    pristine tree."""
    from rxl import paths
    from rxl.tree import base as base_mod
    try:
        tree, kind = base_mod.resolve(opts.src, opts.work or str(paths.work_root()),
                                      base_url_override=opts.base_url, dry_run=opts.dry_run,
                                      lock=opts.lock, echo=st.echo)
    except base_mod.TreeError as exc:
        raise StageFailed(f"series: {exc}") from None
    st.src = src = tree.src
    if tree.pristine and opts.auto_pristine and not st.pristine_kernel and not st.pristine_src:
        st.pristine_src = tree.pristine
    if opts.dry_run and tree.commands:
        return StageRecord("series", "planned", detail=tree.how, commands=tree.commands)
    if kind == base_mod.SrcKind.PLAIN_APPLIED:
        return StageRecord("series", "ok", detail=f"{tree.how}; not a git tree, the series' "
                           "files match patches/")
    head = git_out(src, "log", "-1", "--format=%h %s").strip()
    changed = git_out(src, "status", "--porcelain", "--untracked-files=no")
    n_mod = sum(1 for ln in changed.splitlines() if ln.strip())
    base = series_base()
    n = git_out(src, "rev-list", "--count", f"{base}..HEAD").strip() if base else "?"
    return StageRecord("series", "ok", commands=tree.commands,
                       detail=f"{tree.how}; HEAD {head}; {n} commits on the base; "
                              f"{n_mod} uncommitted changes")


def build(opts: RunOptions, st: RunState) -> StageRecord:
    """The patched kernel (unless ``--kernel``), then, unless one is given or
    ``--no-auto-pristine``, the base's kernel from a shared checkout of
    patches/BASE's commit (own objdir); kernels whose stamp matches are reused."""
    rec = _build_patched(opts, st)
    if not st.pristine_kernel and not st.pristine_src and opts.auto_pristine:
        base = series_base()
        if base is None:
            rec.detail += "; no patches/BASE: no pristine kernel"
        elif not git_out(st.src, "rev-parse", "HEAD").strip() and \
                not (opts.dry_run and not Path(st.src).exists()):  # a planned work clone
            rec.detail += f"; {st.src} is not a git tree: no pristine kernel"
        elif opts.dry_run:
            st.pristine_src = str(Path(opts.guest_dir) / f"pristine-src-{base[:12]}")
            rec.commands.append(f"git clone -q --shared --no-checkout {st.src} "
                                f"{st.pristine_src} && git -C {st.pristine_src} "
                                f"checkout -q --detach {base}")
        else:
            st.pristine_src = pristine_checkout(
                st.src, base, Path(opts.guest_dir) / f"pristine-src-{base[:12]}", st.echo)
    if st.pristine_src and not st.pristine_kernel:
        rec = _build_pristine(opts, st, rec)
    return rec


def _needs_toolchain(src: str, objdir: str, shared: bool = False) -> bool:
    """Whether a build of ``src`` in ``objdir`` runs kernel-toolchain: not when
    it is done there, nor when the toolchain store of its base has one
    (rxl.tree.toolchain), nor (``shared``: the patched build of this dry run
    plans it and stores it) when the tree descends from the base."""
    from rxl.tree import build as build_mod
    from rxl.tree import toolchain as tc
    if build_mod.toolchain_done(objdir, src) or tc.seedable(src, objdir):
        return False
    return not (shared and (tc.base_key(src) or not Path(src).exists()))


def _toolchain_note(stages, src: str, objdir: str) -> List[str]:
    """The comment line a plan without kernel-toolchain carries."""
    if any(s.name == "kernel-toolchain" for s in stages):
        return []
    return [f"# kernel-toolchain: done in {objdir}, or copied from the store of the base "
            "(rxl.tree.toolchain)"]


def _build_pristine(opts: RunOptions, st: RunState, rec: StageRecord) -> StageRecord:
    """Build the same kernel config from a checkout of the base (own objdir)."""
    from rxl.tree import build as build_mod
    src = st.pristine_src
    # One objdir per pristine tree: OBJTOP contains the tree's path, and the
    # kernel-toolchain marker is per objdir.
    objdir = str(Path(opts.guest_dir) / f"obj-{Path(src).name}")
    if not (Path(src) / "tools/build/make.py").is_file() and not opts.dry_run:
        raise StageFailed(f"build: --pristine-src {src} is not a FreeBSD source tree")
    stages = build_mod.plan_stages(src, objdir, toolchain=_needs_toolchain(
        src, objdir, shared=opts.dry_run and rec.status == "planned"))
    rec.commands += _toolchain_note(stages, src, objdir) + [s.shell() for s in stages]
    kpath = str(build_mod.kernel_path(src, objdir))
    st.pristine_kernel = kpath
    rec.detail += f"; pristine kernel: {kpath}"
    if opts.dry_run:
        return rec
    if kernel_cached(src, kpath):
        rec.detail += " (cached)"
        return rec
    try:
        res = build_mod.build_kernel(src, objdir, logdir=str(Path(opts.out) / "pristine"),
                                     echo=quiet(st.echo))
    except build_mod.BuildError as exc:
        raise StageFailed(f"build: pristine: {exc}") from None
    rec.detail += "; pristine: " + build_timings(res)
    write_kernel_stamp(src, kpath, "build: pristine", res)
    return rec


def _build_patched(opts: RunOptions, st: RunState) -> StageRecord:
    if opts.kernel:
        if not Path(opts.kernel).is_file():
            raise StageFailed(f"build: --kernel {opts.kernel}: no such file")
        return StageRecord("build", "skipped", detail=f"--kernel {opts.kernel}")
    from rxl.tree import build as build_mod
    src, objdir = st.src, opts.objdir
    stages = build_mod.plan_stages(src, objdir, toolchain=_needs_toolchain(src, objdir))
    cmds = _toolchain_note(stages, src, objdir) + [s.shell() for s in stages]
    kpath = str(build_mod.kernel_path(src, objdir))
    if opts.dry_run:
        st.kernel = kpath
        return StageRecord("build", "planned", commands=cmds, detail=f"kernel: {kpath}")
    if kernel_cached(src, kpath):
        st.kernel = kpath
        return StageRecord("build", "ok", commands=cmds,
                           detail=f"kernel: {kpath} (cached: {kpath}.rxl-stamp matches)")
    try:
        res = build_mod.build_kernel(src, objdir, logdir=opts.out, echo=quiet(st.echo))
    except build_mod.BuildError as exc:
        raise StageFailed(f"build: {exc}") from None
    write_kernel_stamp(src, kpath, "build", res)
    st.kernel = kpath
    cmds.append(f"# {build_timings(res)}")
    log = str(res[-1].log) if res else ""
    return StageRecord("build", "ok", log=log, commands=cmds, detail=f"kernel: {kpath}")


def test_cc_lines(opts: RunOptions, src: str, objdir: str, tests_out: str) -> List[str]:
    """The host clang lines that build FreeBSD's ATF programs and ``--test``/``--atf-dir``
    ones into ``tests_out`` against the sysroot of ``src``'s world in ``objdir``."""
    from rxl.tree import world as world_mod
    sysroot = str(world_mod.worldtmp(src, objdir))
    return [shlex.join(world_mod.atf_cc_argv(source, f"{tests_out}/{name}", sysroot))
            for name, source in [(n, str(Path(src) / rel)) for n, rel in world_mod.BASE_TESTS]
            + list(opts.extra_tests)]


def world(opts: RunOptions, st: RunState) -> StageRecord:
    """The guest userland (skipped while its stamp matches) and the ATF programs."""
    from rxl.tree import world as world_mod
    from rxl.tree.build import BuildError
    src, objdir = st.src, opts.objdir
    tests_out = str(st.stage_dir / "tests")
    cmds = world_mod.shell_lines(src, objdir) + test_cc_lines(opts, src, objdir, tests_out)
    missing = world_mod.missing_atf_headers(src)
    note = (f"tree lacks {', '.join(missing)}: generated equivalents go to libatf-c's objdir"
            if missing else "")
    if opts.dry_run:
        st.world = world_mod.world_outputs(src, objdir)
        st.tests = {n: Path(tests_out) / n for n, _ in world_mod.BASE_TESTS}
        st.tests.update({n: Path(tests_out) / n for n, _ in opts.extra_tests})
        return StageRecord("world", "planned", commands=cmds, detail=note)
    log = str(Path(opts.out) / "world-build.log")
    try:
        r = world_mod.build_world(src, objdir, logdir=opts.out, force=opts.rebuild_world,
                                  echo=quiet(st.echo))
        st.world = r["outputs"]
        st.tests = world_mod.build_tests(src, objdir, tests_out, logdir=opts.out,
                                         extra_sources=opts.extra_tests, echo=quiet(st.echo))
    except BuildError as exc:
        raise StageFailed(f"world: {exc}") from None
    except RuntimeError as exc:
        raise StageFailed(f"world: {exc}") from None
    detail = ("up to date, skipped" if r["skipped"] else "built") + (f"; {note}" if note else "")
    return StageRecord("world", "ok", log=log, commands=cmds, detail=detail)


def image(opts: RunOptions, st: RunState) -> StageRecord:
    """One guest root per boot under the run's staging directory."""
    assert st.world is not None and st.kernel is not None
    details = []
    for label, kernel, tunables in boots(opts, st.kernel, st.pristine_kernel):
        root = str(st.stage_dir / label)
        st.roots[label] = root
        if opts.dry_run:
            details.append(f"{label}: {root} (kernel {kernel}, tunables {tunables or '-'})")
            continue
        details.append(stage_console_root(opts, st, label, kernel, tunables, root))
    return StageRecord("image", "planned" if opts.dry_run else "ok", detail="; ".join(details))


def stage_console_root(opts: RunOptions, st: RunState, label: str, kernel: str,
                       tunables: Dict[str, str], root: str) -> str:
    """Stage the root of a boot whose rc runs the cases on the console: the programs
    of ``st.world`` (the narrowed world, or the sshd userland, a superset, when an SSH
    boot falls back), ``kernel``, the ATF programs ``st.tests`` under /rxl/tests, the
    simple loader with ``tunables``. Returns the detail line; raises StageFailed."""
    from rxl.guest import image as image_mod
    progs = {g: str(p) for g, p in st.world.programs.items()}
    guest_tests = {f"/rxl/tests/{n}": str(p) for n, p in sorted(st.tests.items())}
    try:
        dyn = [p for g, p in progs.items() if g != "/libexec/ld-elf.so.1"]
        libs = image_mod.resolve_libs(dyn, str(st.world.sysroot))
        acts = image_mod.plan_root(
            loader_efi=str(st.world.loader_efi), kernel=kernel, programs=progs,
            libs=libs, tests=guest_tests,
            loader_rc=image_mod.render_loader_rc(tunables),
            rc=image_mod.render_rc(label, programs_for(opts, label, guest_tests),
                                   case_timeout=opts.case_timeout,
                                   atf_vars=opts.atf_vars))
        info = image_mod.stage_root(root, acts)
    except (image_mod.ImageError, ValueError, OSError) as exc:
        raise StageFailed(f"image: {label}: {exc}") from None
    return f"{label}: {root} ({info['files']} files, {info['bytes'] >> 20} MiB)"


def programs_for(opts: RunOptions, label: str, guest_tests: Dict[str, str]) -> List[str]:
    """ATF programs a boot runs: all, except on the spread boots (placement only)
    unless --tests-on-spread (TCG: the suite costs minutes per boot)."""
    if label in SPREAD_BOOTS and not opts.tests_on_spread:
        return []
    return sorted(guest_tests)


def boot(opts: RunOptions, st: RunState) -> StageRecord:
    """QEMU per staged root, its console teed to a log and watched; a guest
    that panics, hangs or times out fails the stage after every boot ran."""
    cmds, details = [], []
    failures = []
    for label, root in st.roots.items():
        argv = console_argv(opts, root)
        cmds.append(shlex.join(argv))
        if opts.dry_run:
            st.logs[label] = str(Path(opts.out) / f"console-{label}.log")
            continue
        detail, failure = watch_console(opts, st, label, argv)
        details.append(detail)
        if failure:
            failures.append(failure)
    if opts.dry_run:
        return StageRecord("boot", "planned", commands=cmds)
    rec = StageRecord("boot", "failed" if failures else "ok", commands=cmds,
                      detail="; ".join(details), log=", ".join(st.logs.values()))
    for f in failures:
        st.echo(f"boot: {f}")
    return rec


def console_argv(opts: RunOptions, root: str) -> List[str]:
    """QEMU's argv for the console boot of ``root``. Raises StageFailed on a bad shape."""
    from rxl.guest import qemu as qemu_mod
    fw = qemu_mod.find_ovmf()
    # snapshot=on: the staged directory is never written. The guest's
    # root stays read-only anyway (rc.j2 writes no file).
    cfg = guest_config(root, opts)
    try:
        return qemu_mod.build_argv(cfg, firmware=fw or "/usr/share/OVMF/OVMF_CODE_4M.fd"
                                   if opts.dry_run else fw)
    except qemu_mod.QemuConfigError as exc:
        raise StageFailed(f"boot: {exc}") from None


def watch_console(opts: RunOptions, st: RunState, label: str,
                  argv: List[str]) -> Tuple[str, Optional[str]]:
    """Boot ``argv`` with its console teed to ``<out>/console-<label>.log`` (set in
    ``st.logs``) and watched to the rc's end marker. Returns ``(detail, failure)``:
    failure is None, or the one line of a panic, hang or timeout (the log is kept for
    parse). Raises StageFailed when QEMU cannot be started."""
    from rxl.guest import console as console_mod
    log = str(Path(opts.out) / f"console-{label}.log")
    st.logs[label] = log
    st.echo(f"boot: {label}: QEMU started, console {log}")
    try:
        res = console_mod.watch(console_mod.SerialTransport(argv), log,
                                echo=lambda s, lb=label: st.echo(f"  [{lb}] {s}"))
        return (f"{label}: end marker at {res.end_seen_at:.0f} s, "
                f"QEMU exit after {res.seconds:.0f} s"), None
    except console_mod.GuestError as exc:
        # Keep going: the other boots still tell us something; parse reports it.
        return (f"{label}: {exc.kind} after {exc.seconds:.0f} s",
                f"{label}: guest {exc.kind}: {exc}")
    except FileNotFoundError as exc:
        raise StageFailed(f"boot: {exc}") from None


def parse(opts: RunOptions, st: RunState) -> StageRecord:
    """Each console log -> :class:`rxl.verify.parse.RunResult`."""
    if opts.dry_run:
        return StageRecord("parse", "planned", detail=", ".join(st.logs.values()))
    for label, log in st.logs.items():
        st.runs[label] = parse_mod.parse_file(log)
    detail = "; ".join(f"{k}: {v.outcome}, {len(v.cases)} cases" for k, v in st.runs.items())
    return StageRecord("parse", "ok", detail=detail)


def report(opts: RunOptions, st: RunState) -> StageRecord:
    """The verdict, and report.json, junit.xml and report.txt under ``--out``."""
    out = Path(opts.out)
    if opts.dry_run:
        return StageRecord("report", "planned",
                           detail=f"{out}/report.json, {out}/junit.xml, {out}/report.txt")
    st.verdict = report_mod.verdict(
        st.runs, pristine="pristine" if "pristine" in st.runs else None,
        placements={label: int(v) for label, v in SPREAD_BOOTS.items()
                    if label in st.runs},
        new_programs=opts.new_programs, base_programs=BASE_PROGRAMS)
    if "pristine" not in st.runs:
        st.verdict.ok = False
        st.verdict.reasons.append("pristine: no pristine kernel given (--pristine-kernel); "
                                  "the must-fail-on-pristine rule is unchecked")
    (out / "report.json").write_text(json_text(st))
    (out / "junit.xml").write_text(report_mod.to_junit(st.runs))
    (out / "report.txt").write_text(report_mod.table(st.runs, st.verdict, st.fallbacks))
    return StageRecord("report", "ok", log=str(out / "report.txt"),
                       detail=f"{out}/report.json, {out}/junit.xml, {out}/report.txt")


def json_text(st: RunState) -> str:
    """report.json's text: the runs, every stage's record so far, the verdict."""
    from dataclasses import asdict
    return report_mod.to_json(st.runs, stages=[asdict(r) for r in st.records],
                              verdict_=st.verdict)


#: The stages in order, by name (:data:`rxl.verify.job.STAGES`).
ALL = (("series", series), ("build", build), ("world", world), ("image", image),
       ("boot", boot), ("parse", parse), ("report", report))
