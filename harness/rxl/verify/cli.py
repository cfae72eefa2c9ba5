"""``rxl run`` (the main job), ``rxl parse`` and ``rxl doctor``.

``rxl run --src DIR`` goes through seven stages, each recorded with a status
(``ok``, ``failed``, ``skipped``, ``planned``), wall seconds and its log:

    series  the tree: a FreeBSD source tree with the series applied
            (``rxl series apply --src DIR``), its HEAD and local changes
    build   the patched kernel (rxl.tree.build, issue 3), unless --kernel is given
    world   the guest userland and the ATF programs (rxl.tree.world)
    image   one guest root per boot (rxl.guest.image): patched, spread, pristine
    boot    QEMU per root, console teed and watched (rxl.guest.qemu, rxl.guest.console)
    parse   console logs -> results (rxl.verify.parse)
    report  report.json, junit.xml, report.txt (rxl.verify.report)

A failing stage prints one line naming its log and the run exits non-zero;
nothing is deleted (``--out`` keeps every log and report). ``--dry-run``
prints every command the run would execute, in order, and exits 0.
"""

from __future__ import annotations

from rxl import paths

import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import click

from rxl.verify import parse as parse_mod
from rxl.verify import report as report_mod

#: Default guest staging area and log root (this machine's layout).
DEFAULT_GUEST_DIR = paths.GUEST
DEFAULT_LOG_ROOT = paths.LOGS
#: Loader tunable that turns on commit 1's spread for the guest's em0
#: (iflib device tunable, CTLFLAG_RDTUN under dev.em.0.iflib).
SPREAD_TUNABLE = ("dev.em.0.iflib.core_spread", "1")
#: FreeBSD's own test programs: must pass on patched and pristine.
BASE_PROGRAMS = ("so_reuseport_lb_test",)

STAGES = ("series", "build", "world", "image", "boot", "parse", "report")


@dataclass
class StageRecord:
    """One stage's outcome. ``seconds``: wall time; ``log``: file to read on failure."""

    name: str
    status: str
    seconds: float = 0.0
    log: str = ""
    detail: str = ""
    commands: List[str] = field(default_factory=list)


class StageFailed(Exception):
    """A stage failed; the message is the one-line error (it names the log)."""


@dataclass
class RunOptions:
    src: str
    objdir: str
    out: str
    guest_dir: str
    kernel: Optional[str]
    pristine_kernel: Optional[str]
    spread: bool
    case_timeout: int
    new_programs: Tuple[str, ...]
    extra_tests: Tuple[Tuple[str, str], ...]
    memory_mib: int
    dry_run: bool
    rebuild_world: bool
    pristine_src: Optional[str] = None
    tests_on_spread: bool = False
    auto_pristine: bool = True


def _one_line(exc: BaseException) -> str:
    """An exception as one line: ``PATH: reason`` for an OSError."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def _echo_err(msg: str) -> None:
    click.echo(msg, err=True)


def _git(src: str, *args: str) -> str:
    try:
        return subprocess.run(["git", "-C", src, *args], capture_output=True, text=True,
                              check=True).stdout.rstrip("\n")
    except (OSError, subprocess.CalledProcessError):
        return ""


#: The project's patch series (issue 3): ``patches/BASE`` names the base commit.
REPO_PATCHES = Path(__file__).resolve().parents[3] / "patches"


def series_base(patches_dir: Path = REPO_PATCHES) -> Optional[str]:
    """The base commit (40 hex) from ``patches/BASE``, or None if there is none."""
    try:
        from rxl.tree.patch import SeriesError, parse_base
        return parse_base((Path(patches_dir) / "BASE").read_text()).commit
    except (OSError, ImportError):
        return None
    except SeriesError as exc:
        raise StageFailed(f"series: {exc}") from None


#: The project's copies of the files the series adds (``sys/...``, issue 3).
REPO_SYS = REPO_PATCHES.parent / "sys"


def is_git_toplevel(src: str) -> bool:
    """True if ``src`` is the top of a git work tree (not a folder inside one)."""
    top = _git(src, "rev-parse", "--show-toplevel").strip()
    return bool(top) and os.path.realpath(top) == os.path.realpath(src)


def unapplied_files(src: str, repo_sys: Path = REPO_SYS) -> List[Tuple[str, str]]:
    """(path, why) for each of the series' files (those in ``repo_sys``) that
    ``src`` lacks or holds with other bytes; [] when all are there, or when
    this checkout has no ``sys/``."""
    out: List[Tuple[str, str]] = []
    if not repo_sys.is_dir():
        return out
    for p in sorted(repo_sys.rglob("*")):
        if not p.is_file() or p.name.startswith(".") or "__pycache__" in p.parts:
            continue
        rel = p.relative_to(repo_sys.parent).as_posix()
        mine = Path(src) / rel
        if not mine.is_file():
            out.append((rel, "is missing"))
        elif mine.read_bytes() != p.read_bytes():
            out.append((rel, "differs from this repository's copy"))
    return out


def pristine_checkout(src: str, base: str, dest: Path,
                      echo: Callable[[str], None] = _echo_err) -> str:
    """A checkout of ``base`` at ``dest`` borrowing ``src``'s objects (``clone --shared``).

    ``src``'s own checkout is never touched. The snapshot lacks some large
    blobs, so git's checkout reports them and stops early; that is accepted
    when HEAD is ``base`` and ``tools/build/make.py`` is there (said, not
    hidden). Raises StageFailed if ``dest`` exists and is something else.
    """
    def head(d: Path) -> str:
        return _git(str(d), "rev-parse", "HEAD").strip()

    if dest.exists():
        if head(dest) == base and (dest / "tools/build/make.py").is_file():
            return str(dest)
        raise StageFailed(f"build: {dest} exists but is not a checkout of {base[:12]}; "
                          "move it away or pass --pristine-src")
    dest.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", src, str(dest)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise StageFailed(f"build: git clone --shared {src} {dest} failed: "
                          f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    r = subprocess.run(["git", "-C", str(dest), "checkout", "-q", "--detach", base],
                       capture_output=True, text=True)
    missing = [ln for ln in r.stderr.splitlines() if "unable to read sha1 file" in ln]
    if head(dest) != base or not (dest / "tools/build/make.py").is_file():
        raise StageFailed(f"build: checkout of {base[:12]} in {dest} failed: "
                          f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
    echo(f"build: pristine tree {dest} at {base[:12]}"
         + (f" ({len(missing)} files of the snapshot have no blob and are absent)"
            if missing else ""))
    return str(dest)


def _timings(results) -> str:
    """``name N s (lock wait W s)`` per build stage result (rxl.tree.build.StageResult)."""
    return ", ".join(f"{r.name} {r.seconds:.0f} s (lock wait {r.extra.get('wait_seconds', '?')} s)"
                     for r in results)


def kernel_stamp_text(src: str, kernel: str) -> str:
    """What a cached kernel must match: last commit under sys/, the uncommitted
    changes under sys/, and the kernel file's size and mtime (ns)."""
    head = _git(src, "log", "-1", "--format=%H", "--", "sys").strip()
    dirty = _git(src, "status", "--porcelain", "--untracked-files=no", "--", "sys")
    diff = _git(src, "diff", "HEAD", "--", "sys") if dirty.strip() else ""
    import hashlib
    st = os.stat(kernel) if os.path.exists(kernel) else None
    return "\n".join([head, hashlib.sha256(diff.encode()).hexdigest() if diff else "clean",
                      f"{st.st_size} {st.st_mtime_ns}" if st else "no kernel"]) + "\n"


def write_kernel_stamp(src: str, kernel: str, what: str = "build", results=()) -> None:
    """Write ``<kernel>.rxl-stamp`` after a build; StageFailed if the build
    left no kernel there (a stamp is never written for a missing kernel)."""
    if not Path(kernel).is_file():
        log = f"; log {results[-1].log}" if results else ""
        raise StageFailed(f"{what}: make.py finished but left no kernel at {kernel}{log}")
    try:
        Path(kernel + ".rxl-stamp").write_text(kernel_stamp_text(src, kernel))
    except OSError as exc:
        raise StageFailed(f"{what}: cannot write {kernel}.rxl-stamp: {exc.strerror}") from None


def kernel_cached(src: str, kernel: str) -> bool:
    """True if ``<kernel>.rxl-stamp`` says this kernel was built from the tree as it is."""
    stamp = Path(kernel + ".rxl-stamp")
    return (Path(kernel).is_file() and stamp.is_file()
            and stamp.read_text() == kernel_stamp_text(src, kernel))


def boots(opts: RunOptions, patched_kernel: str) -> List[Tuple[str, str, Dict[str, str]]]:
    """The guest boots of a run: (label, kernel path, loader tunables). Pure."""
    out = [("patched", patched_kernel, {})]
    if opts.spread:
        out.append(("spread", patched_kernel, dict([SPREAD_TUNABLE])))
    if opts.pristine_kernel:
        out.append(("pristine", opts.pristine_kernel, {}))
    return out


def guest_config(root: str, opts: RunOptions):
    """The QEMU guest of one boot (rxl.guest.qemu.GuestConfig), staged root ``root``."""
    from rxl.guest import qemu as qemu_mod
    return qemu_mod.GuestConfig(root_dir=root, memory_mib=opts.memory_mib)


def check_options(opts: RunOptions) -> None:
    """Refuse, in one line (click.BadParameter/ClickException), options that
    would otherwise fail only after the builds: the guest configuration
    (--memory, the staging path), --case-timeout, --test sources, names
    given to --new-program, --pristine-kernel and --pristine-src."""
    from rxl.guest import qemu as qemu_mod
    from rxl.tree import world as world_mod
    if opts.case_timeout < 1:
        raise click.BadParameter(f"{opts.case_timeout}: must be >= 1 (seconds per case)",
                                 param_hint="'--case-timeout'")
    root = str(Path(opts.guest_dir) / Path(opts.out).name / "patched")
    try:
        # The firmware is looked for at boot (rxl doctor checks it); only the
        # configuration is checked here.
        qemu_mod.validate(guest_config(root, opts))
    except qemu_mod.QemuConfigError as exc:
        if "memory_mib" in str(exc):
            raise click.BadParameter(f"{opts.memory_mib}: {exc}", param_hint="'--memory'")
        raise click.ClickException(f"guest configuration: {exc}") from None
    names = [n for n, _ in world_mod.BASE_TESTS]
    for name, source in opts.extra_tests:
        if name in names:
            raise click.BadParameter(f"{name}: a test program of that name is already "
                                     "built (--atf-dir or an earlier --test)",
                                     param_hint="'--test'")
        names.append(name)
        if not Path(source).is_file():
            raise click.BadParameter(f"{name}={source}: no such file", param_hint="'--test'")
    unknown = [n for n in opts.new_programs if n not in names]
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: not a test program of this run "
                                 f"(known: {', '.join(names)})",
                                 param_hint="'--new-program'")
    if opts.pristine_kernel and not Path(opts.pristine_kernel).is_file():
        raise click.BadParameter(f"{opts.pristine_kernel}: no such file",
                                 param_hint="'--pristine-kernel'")
    if opts.pristine_src and not opts.pristine_kernel and \
            not (Path(opts.pristine_src) / "tools/build/make.py").is_file():
        raise click.BadParameter(f"{opts.pristine_src}: not a FreeBSD source tree "
                                 "(no tools/build/make.py)", param_hint="'--pristine-src'")


class Runner:
    """Carries out the stages; each method returns a StageRecord or raises StageFailed."""

    def __init__(self, opts: RunOptions, echo: Callable[[str], None] = _echo_err):
        self.o = opts
        self.echo = echo
        self.records: List[StageRecord] = []
        self.kernel: Optional[str] = opts.kernel
        self.world = None
        self.tests: Dict[str, Path] = {}
        self.roots: Dict[str, str] = {}
        self.logs: Dict[str, str] = {}
        self.runs: Dict[str, parse_mod.RunResult] = {}
        self.verdict: Optional[report_mod.Verdict] = None
        # One staging directory per run (named like --out): QEMU's vvfat reads
        # file contents lazily, so a root must not change under a running guest.
        self.stage_dir = Path(opts.guest_dir) / Path(opts.out).name

    # ---------------------------------------------------------------- stages
    def series(self) -> StageRecord:
        """The tree must hold the series: with patches/BASE, a git tree's HEAD
        must have the base as an ancestor and commits on top of it; a tree
        that is not a git tree must hold the series' files as sys/ has them."""
        src = self.o.src
        if not (Path(src) / "tools/build/make.py").is_file() or not (Path(src) / "sys").is_dir():
            raise StageFailed(f"series: {src} is not a FreeBSD source tree "
                              "(no tools/build/make.py or sys/)")
        if not (Path(src) / "sys/amd64/conf").is_dir():
            raise StageFailed(f"series: {src} is not a FreeBSD source tree for amd64 "
                              "(no sys/amd64/conf)")
        is_git = is_git_toplevel(src)
        head = (_git(src, "log", "-1", "--format=%h %s").strip() if is_git else "") \
            or "not a git tree"
        changed = _git(src, "status", "--porcelain", "--untracked-files=no") if is_git else ""
        n_mod = sum(1 for ln in changed.splitlines() if ln.strip())
        detail = f"HEAD {head}; {n_mod} uncommitted changes"
        base = series_base()
        if not base:
            return StageRecord("series", "ok", detail=detail + "; no patches/BASE: not checked")
        apply = f"apply it first: rxl series apply --src {src}"
        if is_git:
            n_patches = len(list(REPO_PATCHES.glob("[0-9][0-9][0-9][0-9]-*.patch")))
            anc = subprocess.run(["git", "-C", src, "merge-base", "--is-ancestor", base, "HEAD"],
                                 capture_output=True).returncode == 0
            if not anc:
                raise StageFailed(f"series: base {base[:12]} (patches/BASE) is not an ancestor "
                                  f"of HEAD ({head}) in {src}: the series is not applied; "
                                  f"{apply}")
            n = _git(src, "rev-list", "--count", f"{base}..HEAD").strip()
            if n in ("", "0"):
                raise StageFailed(f"series: HEAD of {src} is the base {base[:12]} "
                                  f"(patches/BASE) with no commits on top: the series is "
                                  f"not applied; {apply}")
            detail += f"; {n} commits on base {base[:12]} (patches/ has {n_patches})"
        else:
            bad = unapplied_files(src)
            if bad:
                rel, why = bad[0]
                raise StageFailed(f"series: {src} is not a git tree and {rel} {why} "
                                  f"({len(bad)} of the series' files): the series is not "
                                  f"applied; apply it to a git clone holding base "
                                  f"{base[:12]}: rxl series apply --src DIR")
            detail += "; the series' files match this repository's sys/"
        return StageRecord("series", "ok", detail=detail)

    def build(self) -> StageRecord:
        rec = self._build_patched()
        if not self.o.pristine_kernel and not self.o.pristine_src and self.o.auto_pristine:
            base = series_base()
            if base is None:
                rec.detail += "; no patches/BASE: no pristine kernel"
            elif not _git(self.o.src, "rev-parse", "HEAD").strip():
                rec.detail += f"; {self.o.src} is not a git tree: no pristine kernel"
            elif self.o.dry_run:
                self.o.pristine_src = str(Path(self.o.guest_dir) / f"pristine-src-{base[:12]}")
                rec.commands.append(f"git clone -q --shared --no-checkout {self.o.src} "
                                    f"{self.o.pristine_src} && git -C {self.o.pristine_src} "
                                    f"checkout -q --detach {base}")
            else:
                self.o.pristine_src = pristine_checkout(
                    self.o.src, base, Path(self.o.guest_dir) / f"pristine-src-{base[:12]}",
                    self.echo)
        if self.o.pristine_src and not self.o.pristine_kernel:
            rec = self._build_pristine(rec)
        return rec

    def _build_pristine(self, rec: StageRecord) -> StageRecord:
        """Build the same kernel config from a checkout of the base (own objdir)."""
        from rxl.tree import build as build_mod
        src = self.o.pristine_src
        # One objdir per pristine tree: OBJTOP contains the tree's path, and the
        # kernel-toolchain marker is per objdir.
        objdir = str(Path(self.o.guest_dir) / f"obj-{Path(src).name}")
        if not (Path(src) / "tools/build/make.py").is_file() and not self.o.dry_run:
            raise StageFailed(f"build: --pristine-src {src} is not a FreeBSD source tree")
        stages = build_mod.plan_stages(src, objdir, toolchain=not build_mod.toolchain_done(objdir))
        rec.commands += [s.shell() for s in stages]
        kpath = str(build_mod.kernel_path(src, objdir))
        self.o.pristine_kernel = kpath
        rec.detail += f"; pristine kernel: {kpath}"
        if self.o.dry_run:
            return rec
        if kernel_cached(src, kpath):
            rec.detail += " (cached)"
            return rec
        try:
            res = build_mod.build_kernel(src, objdir, logdir=str(Path(self.o.out) / "pristine"),
                                         echo=self._quiet_echo)
        except build_mod.BuildError as exc:
            raise StageFailed(f"build: pristine: {exc}") from None
        rec.detail += "; pristine: " + _timings(res)
        write_kernel_stamp(src, kpath, "build: pristine", res)
        return rec

    def _build_patched(self) -> StageRecord:
        if self.o.kernel:
            if not Path(self.o.kernel).is_file():
                raise StageFailed(f"build: --kernel {self.o.kernel}: no such file")
            return StageRecord("build", "skipped", detail=f"--kernel {self.o.kernel}")
        from rxl.tree import build as build_mod
        src, objdir = self.o.src, self.o.objdir
        stages = build_mod.plan_stages(src, objdir, toolchain=not build_mod.toolchain_done(objdir))
        cmds = [s.shell() for s in stages]
        kpath = str(build_mod.kernel_path(src, objdir))
        if self.o.dry_run:
            self.kernel = kpath
            return StageRecord("build", "planned", commands=cmds, detail=f"kernel: {kpath}")
        if kernel_cached(src, kpath):
            self.kernel = kpath
            return StageRecord("build", "ok", commands=cmds,
                               detail=f"kernel: {kpath} (cached: {kpath}.rxl-stamp matches)")
        try:
            res = build_mod.build_kernel(src, objdir, logdir=self.o.out, echo=self._quiet_echo)
        except build_mod.BuildError as exc:
            raise StageFailed(f"build: {exc}") from None
        write_kernel_stamp(src, kpath, "build", res)
        self.kernel = kpath
        cmds.append(f"# {_timings(res)}")
        log = str(res[-1].log) if res else ""
        return StageRecord("build", "ok", log=log, commands=cmds, detail=f"kernel: {kpath}")

    def world_stage(self) -> StageRecord:
        from rxl.tree import world as world_mod
        from rxl.tree.build import BuildError
        src, objdir = self.o.src, self.o.objdir
        cmds = world_mod.shell_lines(src, objdir)
        sysroot = str(world_mod.worldtmp(src, objdir))
        tests_out = str(self.stage_dir / "tests")
        for name, source in [(n, str(Path(src) / rel)) for n, rel in world_mod.BASE_TESTS] + \
                list(self.o.extra_tests):
            cmds.append(shlex.join(world_mod.atf_cc_argv(source, f"{tests_out}/{name}", sysroot)))
        missing = world_mod.missing_atf_headers(src)
        note = (f"tree lacks {', '.join(missing)}: generated equivalents go to libatf-c's objdir"
                if missing else "")
        if self.o.dry_run:
            self.world = world_mod.world_outputs(src, objdir)
            self.tests = {n: Path(tests_out) / n for n, _ in world_mod.BASE_TESTS}
            self.tests.update({n: Path(tests_out) / n for n, _ in self.o.extra_tests})
            return StageRecord("world", "planned", commands=cmds, detail=note)
        log = str(Path(self.o.out) / "world-build.log")
        try:
            r = world_mod.build_world(src, objdir, logdir=self.o.out, force=self.o.rebuild_world,
                                      echo=self._quiet_echo)
            self.world = r["outputs"]
            self.tests = world_mod.build_tests(src, objdir, tests_out, logdir=self.o.out,
                                               extra_sources=self.o.extra_tests,
                                               echo=self._quiet_echo)
        except BuildError as exc:
            raise StageFailed(f"world: {exc}") from None
        except RuntimeError as exc:
            raise StageFailed(f"world: {exc}") from None
        detail = ("up to date, skipped" if r["skipped"] else "built") + (f"; {note}" if note else "")
        return StageRecord("world", "ok", log=log, commands=cmds, detail=detail)

    def _quiet_echo(self, line: str) -> None:
        if "] ---" not in line:
            self.echo(line)

    def image(self) -> StageRecord:
        from rxl.guest import image as image_mod
        assert self.world is not None and self.kernel is not None
        plan = boots(self.o, self.kernel)
        details = []
        progs = {g: str(p) for g, p in self.world.programs.items()}
        guest_tests = {f"/rxl/tests/{n}": str(p) for n, p in sorted(self.tests.items())}
        for label, kernel, tunables in plan:
            root = str(self.stage_dir / label)
            self.roots[label] = root
            if self.o.dry_run:
                details.append(f"{label}: {root} (kernel {kernel}, tunables {tunables or '-'})")
                continue
            try:
                dyn = [p for g, p in progs.items() if g != "/libexec/ld-elf.so.1"]
                libs = image_mod.resolve_libs(dyn, str(self.world.sysroot))
                acts = image_mod.plan_root(
                    loader_efi=str(self.world.loader_efi), kernel=kernel, programs=progs,
                    libs=libs, tests=guest_tests,
                    loader_rc=image_mod.render_loader_rc(tunables),
                    rc=image_mod.render_rc(label, self._programs_for(label, guest_tests),
                                           case_timeout=self.o.case_timeout))
                info = image_mod.stage_root(root, acts)
            except (image_mod.ImageError, ValueError, OSError) as exc:
                raise StageFailed(f"image: {label}: {exc}") from None
            details.append(f"{label}: {root} ({info['files']} files, {info['bytes'] >> 20} MiB)")
        return StageRecord("image", "planned" if self.o.dry_run else "ok",
                           detail="; ".join(details))

    def _programs_for(self, label: str, guest_tests: Dict[str, str]) -> List[str]:
        """ATF programs a boot runs: all, except on the spread boot (placement only)
        unless --tests-on-spread (TCG: the suite costs minutes per boot)."""
        if label == "spread" and not self.o.tests_on_spread:
            return []
        return sorted(guest_tests)

    def boot(self) -> StageRecord:
        from rxl.guest import console as console_mod
        from rxl.guest import qemu as qemu_mod
        fw = qemu_mod.find_ovmf()
        cmds, details = [], []
        failures = []
        for label, root in self.roots.items():
            # snapshot=on: the staged directory is never written. The guest's
            # root stays read-only anyway (rc.j2 writes no file).
            cfg = guest_config(root, self.o)
            try:
                argv = qemu_mod.build_argv(cfg, firmware=fw or "/usr/share/OVMF/OVMF_CODE_4M.fd"
                                           if self.o.dry_run else fw)
            except qemu_mod.QemuConfigError as exc:
                raise StageFailed(f"boot: {exc}") from None
            cmds.append(shlex.join(argv))
            log = str(Path(self.o.out) / f"console-{label}.log")
            self.logs[label] = log
            if self.o.dry_run:
                continue
            self.echo(f"boot: {label}: QEMU started, console {log}")
            try:
                res = console_mod.watch(console_mod.SerialTransport(argv), log,
                                        echo=lambda s, lb=label: self.echo(f"  [{lb}] {s}"))
                details.append(f"{label}: end marker at {res.end_seen_at:.0f} s, "
                               f"QEMU exit after {res.seconds:.0f} s")
            except console_mod.GuestError as exc:
                # Keep going: the other boots still tell us something; parse reports it.
                failures.append(f"{label}: guest {exc.kind}: {exc}")
                details.append(f"{label}: {exc.kind} after {exc.seconds:.0f} s")
            except FileNotFoundError as exc:
                raise StageFailed(f"boot: {exc}") from None
        if self.o.dry_run:
            return StageRecord("boot", "planned", commands=cmds)
        rec = StageRecord("boot", "failed" if failures else "ok", commands=cmds,
                          detail="; ".join(details),
                          log=", ".join(self.logs.values()))
        for f in failures:
            self.echo(f"boot: {f}")
        return rec

    def parse_stage(self) -> StageRecord:
        if self.o.dry_run:
            return StageRecord("parse", "planned", detail=", ".join(self.logs.values()))
        for label, log in self.logs.items():
            self.runs[label] = parse_mod.parse_file(log)
        detail = "; ".join(f"{k}: {v.outcome}, {len(v.cases)} cases" for k, v in self.runs.items())
        return StageRecord("parse", "ok", detail=detail)

    def report_stage(self) -> StageRecord:
        out = Path(self.o.out)
        if self.o.dry_run:
            return StageRecord("report", "planned",
                               detail=f"{out}/report.json, {out}/junit.xml, {out}/report.txt")
        self.verdict = report_mod.verdict(
            self.runs, pristine="pristine" if "pristine" in self.runs else None,
            spread="spread" if "spread" in self.runs else None,
            new_programs=self.o.new_programs, base_programs=BASE_PROGRAMS)
        if "pristine" not in self.runs:
            self.verdict.ok = False
            self.verdict.reasons.append("pristine: no pristine kernel given (--pristine-kernel); "
                                        "the must-fail-on-pristine rule is unchecked")
        (out / "report.json").write_text(self.json_text())
        (out / "junit.xml").write_text(report_mod.to_junit(self.runs))
        (out / "report.txt").write_text(report_mod.table(self.runs, self.verdict))
        return StageRecord("report", "ok", log=str(out / "report.txt"),
                           detail=f"{out}/report.json, {out}/junit.xml, {out}/report.txt")

    # ---------------------------------------------------------------- driver
    def json_text(self) -> str:
        return report_mod.to_json(self.runs, stages=[asdict(r) for r in self.records],
                                  verdict_=self.verdict)

    def _stage_log(self, rec: StageRecord) -> None:
        """Write ``<out>/stage-<name>.log`` (status, time, detail, commands, logs)."""
        if self.o.dry_run:
            return
        path = Path(self.o.out) / f"stage-{rec.name}.log"
        lines = [f"stage: {rec.name}", f"status: {rec.status}", f"seconds: {rec.seconds:.1f}",
                 f"detail: {rec.detail}", f"logs: {rec.log or '-'}", "commands:"]
        lines += [f"  {c}" for c in rec.commands]
        path.write_text("\n".join(lines) + "\n")
        if not rec.log:
            rec.log = str(path)

    def _failure_report(self, reason: str) -> None:
        """report.json of a run stopped by a failed stage: every stage so far,
        the runs parsed so far and a failed verdict naming the stage's error."""
        if self.o.dry_run:
            return
        self.verdict = report_mod.Verdict(False, [reason])
        try:
            (Path(self.o.out) / "report.json").write_text(self.json_text())
        except OSError as exc:
            self.echo(f"error: cannot write {self.o.out}/report.json: {exc.strerror}")

    def run(self) -> bool:
        """Run every stage in order; False (after recording it and writing
        report.json with a failed verdict) at the first failure."""
        if not self.o.dry_run:  # a dry run writes nothing
            try:
                Path(self.o.out).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise click.ClickException(f"cannot create --out {self.o.out}: {exc.strerror}")
        steps = [("series", self.series), ("build", self.build), ("world", self.world_stage),
                 ("image", self.image), ("boot", self.boot), ("parse", self.parse_stage),
                 ("report", self.report_stage)]
        ok = True
        for name, fn in steps:
            t0 = time.monotonic()
            self.echo(f"== {name}")
            try:
                try:
                    rec = fn()
                except StageFailed:
                    raise
                except (OSError, RuntimeError, ValueError) as exc:
                    # rxl.tree.build's errors (BuildError, BuildSetupError) are
                    # RuntimeErrors; an OSError is a file the stage needed.
                    raise StageFailed(f"{name}: {_one_line(exc)}") from None
            except StageFailed as exc:
                rec = StageRecord(name, "failed", detail=str(exc))
                rec.seconds = time.monotonic() - t0
                self.records.append(rec)
                self._stage_log(rec)
                self._failure_report(str(exc))
                self.echo(f"error: {exc}")
                return False
            rec.seconds = time.monotonic() - t0
            self.records.append(rec)
            self._stage_log(rec)
            self.echo(f"   {rec.status} in {rec.seconds:.0f} s" +
                      (f": {rec.detail}" if rec.detail else ""))
            if rec.status == "failed":
                ok = False  # boot failures: still parse and report them
        if (Path(self.o.out) / "report.json").exists():  # now with the report stage's record
            (Path(self.o.out) / "report.json").write_text(self.json_text())
        return ok


# -------------------------------------------------------------------- click
def _default_out() -> str:
    return str(Path(DEFAULT_LOG_ROOT) / time.strftime("guest-run-%Y%m%d-%H%M%S"))


#: The series' own ATF tests in this repository (tests/atf/*_test.c).
REPO_ATF_DIR = Path(__file__).resolve().parents[3] / "tests" / "atf"


def series_tests(atf_dir: Optional[str]) -> List[Tuple[str, str]]:
    """(program name, C source) for every ``*_test.c`` in ``atf_dir`` (sorted).

    ``''`` (or None) means no series tests: []. A directory that does not
    exist or holds no ``*_test.c`` is an error (click.BadParameter): the
    series' own tests must never drop out of the verdict silently.
    """
    if not atf_dir:
        return []
    d = Path(atf_dir)
    if not d.is_dir():
        raise click.BadParameter(f"{atf_dir}: no such directory ('' for no series tests)",
                                 param_hint="'--atf-dir'")
    found = [(p.stem, str(p)) for p in sorted(d.glob("*_test.c"))]
    if not found:
        raise click.BadParameter(f"{atf_dir}: no *_test.c in it ('' for no series tests)",
                                 param_hint="'--atf-dir'")
    return found


def _parse_test(value: str) -> Tuple[str, str]:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise click.BadParameter(f"{value!r}: expected NAME=PATH/TO/test.c",
                                 param_hint="'--test'")
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
        raise click.BadParameter(f"{value!r}: NAME must be a plain file name "
                                 "(letters, digits, '_', '.', '-')", param_hint="'--test'")
    return name, os.path.abspath(path)


@click.command("run")
@click.option("--src", default="/usr/src", show_default=True, help="FreeBSD source tree.")
@click.option("--objdir", default=paths.OBJDIR, show_default=True, help="MAKEOBJDIRPREFIX.")
@click.option("--out", default=None, help="Directory for logs and reports "
              "[default: $RXL_WORK/logs/guest-run-<time>].")
@click.option("--guest-dir", default=DEFAULT_GUEST_DIR, show_default=True,
              help="Guest roots and test binaries go to <guest-dir>/<name of --out>/.")
@click.option("--kernel", default=None, help="Patched kernel to boot (skips the build stage).")
@click.option("--pristine-kernel", default=None, help="Kernel built from the base, for comparison.")
@click.option("--pristine-src", default=None,
              help="Checkout of the base (e.g. `git clone --branch main <repo> DIR`): its "
                   "kernel is built with the same config, objdir <guest-dir>/obj-<name of DIR>.")
@click.option("--auto-pristine/--no-auto-pristine", default=True, show_default=True,
              help="Without --pristine-kernel/--pristine-src: check out patches/BASE's "
                   "commit from --src (git clone --shared) and build it.")
@click.option("--spread/--no-spread", default=True, show_default=True,
              help="Also boot the patched kernel with dev.em.0.iflib.core_spread=1.")
@click.option("--tests-on-spread", is_flag=True,
              help="Run the ATF suite on the spread boot too (default: placement only).")
@click.option("--case-timeout", default=300, show_default=True,
              help="Seconds per ATF case (>= 1).")
@click.option("--new-program", "new_programs", multiple=True,
              help="Basename of a test program of the run (from --atf-dir or --test) "
                   "that must fail on pristine; the --atf-dir ones are already.")
@click.option("--test", "tests", multiple=True,
              help="Extra ATF C test: NAME=PATH.c (the file must exist).")
@click.option("--atf-dir", default=str(REPO_ATF_DIR), show_default=True,
              help="The series' ATF tests: every *_test.c is built and counted as new "
                   "(must pass patched, fail pristine). '' for none; a directory that does "
                   "not exist or holds no *_test.c is an error.")
@click.option("--memory", "memory_mib", default=1024, show_default=True,
              help="Guest MiB (>= 128 per NUMA node, 2 nodes).")
@click.option("--rebuild-world", is_flag=True, help="Ignore the world stamp.")
@click.option("--dry-run", is_flag=True, help="Print every command, run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print report.json to stdout.")
def run(src, objdir, out, guest_dir, kernel, pristine_kernel, pristine_src, auto_pristine, spread,
        tests_on_spread, case_timeout,
        new_programs, tests, atf_dir, memory_mib, rebuild_world, dry_run, as_json):
    """Build, boot a two-socket QEMU guest and run the ATF suite, patched vs pristine."""
    stests = series_tests(atf_dir)
    opts = RunOptions(
        src=os.path.abspath(src), objdir=os.path.abspath(objdir),
        out=os.path.abspath(out or _default_out()), guest_dir=os.path.abspath(guest_dir),
        kernel=os.path.abspath(kernel) if kernel else None,
        pristine_kernel=os.path.abspath(pristine_kernel) if pristine_kernel else None,
        spread=spread, case_timeout=case_timeout,
        new_programs=tuple(new_programs) + tuple(n for n, _ in stests),
        extra_tests=tuple(stests) + tuple(_parse_test(t) for t in tests),
        memory_mib=memory_mib,
        dry_run=dry_run, rebuild_world=rebuild_world,
        pristine_src=os.path.abspath(pristine_src) if pristine_src else None,
        tests_on_spread=tests_on_spread, auto_pristine=auto_pristine)
    check_options(opts)
    r = Runner(opts)
    ok = r.run()
    if dry_run:
        for rec in r.records:
            click.echo(f"# {rec.name}: {rec.status}" + (f" ({rec.detail})" if rec.detail else ""))
            for c in rec.commands:
                click.echo(c)
        sys.exit(0 if ok else 1)
    if as_json:
        click.echo(r.json_text())
    elif r.runs:
        click.echo(report_mod.table(r.runs, r.verdict))
    click.echo(f"logs and reports: {opts.out}", err=True)
    sys.exit(0 if ok and r.verdict is not None and r.verdict.ok else 1)


@click.command("parse")
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
def parse(log, as_json):
    """Re-read a saved guest console LOG and print its results.

    Exit 0 only if the run completed and no case failed, broke, timed out or crashed.
    """
    if not Path(log).is_file():
        raise click.ClickException(f"{log}: no such file")
    res = parse_mod.parse_file(log)
    label = res.label or Path(log).stem
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=2, default=str))
    else:
        click.echo(report_mod.table({label: res}))
    good = ("passed", "skipped", "expected_failure")
    sys.exit(0 if res.outcome == "completed" and all(c.status in good for c in res.cases) else 1)


#: (what, how to check, Debian install line). Checks: "bin:NAME", "file:PATH", "py:MODULE".
DOCTOR_CHECKS: Tuple[Tuple[str, str, str], ...] = (
    ("qemu-system-x86_64", "bin:qemu-system-x86_64", "apt-get install -y qemu-system-x86"),
    ("OVMF firmware", "ovmf", "apt-get install -y ovmf"),
    ("clang-16", "bin:clang-16", "apt-get install -y clang-16"),
    ("ld.lld-16", "bin:ld.lld-16", "apt-get install -y lld-16"),
    ("llvm-readelf-16", "bin:llvm-readelf-16", "apt-get install -y llvm-16"),
    ("llvm-ar-16", "bin:llvm-ar-16", "apt-get install -y llvm-16"),
    ("bmake", "bin:bmake", "apt-get install -y bmake"),
    ("flock", "bin:flock", "apt-get install -y util-linux"),
    ("git", "bin:git", "apt-get install -y git"),
    ("python: click", "py:click", "pip install click"),
    ("python: jinja2", "py:jinja2", "pip install jinja2"),
    ("python: yaml", "py:yaml", "pip install pyyaml"),
)


def doctor_results(which: Callable[[str], Optional[str]] = shutil.which) -> List[Tuple[str, bool, str]]:
    """(name, present, install line) for each of :data:`DOCTOR_CHECKS`."""
    from rxl.guest.qemu import find_ovmf
    out = []
    for name, check, install in DOCTOR_CHECKS:
        if check.startswith("bin:"):
            ok = which(check[4:]) is not None
        elif check == "ovmf":
            ok = find_ovmf() is not None
        else:
            try:
                importlib.import_module(check[3:])
                ok = True
            except ImportError:
                ok = False
        out.append((name, ok, install))
    return out


@click.command("doctor")
@click.option("--install", is_flag=True,
              help="Install missing host packages with apt-get (as root); otherwise print "
                   "the exact command.")
@click.option("--json", "as_json", is_flag=True,
              help='Print [{"name", "ok", "install"}] as JSON (exit 1 if any is missing).')
def doctor(install, as_json):
    """Check the host tools `rxl run` needs; print the install line of each missing one."""
    results = doctor_results()
    missing = [(n, i) for n, ok, i in results if not ok]
    if as_json:
        click.echo(json.dumps([{"name": n, "ok": ok, "install": i} for n, ok, i in results],
                              indent=2))
        sys.exit(1 if missing else 0)
    for name, ok, line in results:
        click.echo(f"{'ok     ' if ok else 'MISSING'}  {name:32s}" + ("" if ok else f"  {line}"))
    if not missing:
        return
    apt = sorted({i.split()[-1] for _, i in missing if i.startswith("apt-get")})
    pip = sorted({i.split()[-1] for _, i in missing if i.startswith("pip")})
    if install and apt:
        cmd = ["apt-get", "install", "-y", *apt]
        if os.geteuid() == 0 and shutil.which("apt-get"):
            click.echo(f"running: {shlex.join(cmd)}", err=True)
            if subprocess.run(cmd).returncode != 0:
                raise click.ClickException(f"{shlex.join(cmd)} failed")
            apt = []
        else:
            click.echo(f"not root: run  sudo {shlex.join(cmd)}", err=True)
    if pip:
        click.echo(f"python packages: {sys.executable} -m pip install {' '.join(pip)}", err=True)
    left = [n for n, ok, i in doctor_results() if not ok]
    if left:
        click.echo(f"{len(left)} missing: {', '.join(left)}", err=True)
        sys.exit(1)
