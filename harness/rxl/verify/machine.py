"""The run interface: where one ``rxl run``'s cases run, and the stages all machines share.

One small interface, three implementations, one pipeline (the model is
Linux KUnit's ``LinuxSourceTreeOperations`` with its QEMU and UML
operations).  A :class:`Machine` says how its cases get run, in three steps:

``prepare``    make the machine ready: the own guest stages one root per boot
               (the kernel, the userland, the programs); a target is reached,
               probed, and given the patched kernel if asked
``run_cases``  run the cases there: the own guest boots each root and its
               cases run on the console or over SSH; a target gets the
               programs and runs them over SSH
``collect``    read the results back: the own guest parses each console log;
               a target's are read as they stream in (no stage of its own)

and its :meth:`~Machine.verdict`.  Every machine's pipeline is the same
chain (:meth:`Machine.stages`): ``series -> build -> world ->`` its three
steps under its own stage names ``-> report``.  The implementations:

=============================================  ============================
:class:`rxl.verify.ownguest.SerialGuest`       image -> boot -> parse
:class:`rxl.verify.ownguest.SSHGuest`          image -> boot -> parse
:class:`rxl.verify.target.Target`              target -> tests
=============================================  ============================

This module holds the stages the machines share: the tree (``series``), the
kernels (``build``: the patched one, then the pristine one from a shared
checkout of the base), the guest userland and the ATF programs (``world``)
and the report files (``report``).
"""

from __future__ import annotations

import abc
import shlex
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from rxl import paths
from rxl.cli.options import missing
from rxl.errors import RxlError
from rxl.tree import base as tree_base
from rxl.tree import patch as tree_patch
from rxl.tree import version as tree_version
from rxl.tree import build as tree_build
from rxl.tree import toolchain
from rxl.tree import world as tree_world
from rxl.verify import hostsysctl, kernels, modboot
from rxl.verify import report as report_mod
from rxl.verify.pipeline import RunState, Stage, StageFailed, StageRecord, json_text
from rxl.verify.request import BuildRequest, CasesRequest, RunRequest

#: FreeBSD's own test programs: must pass on patched and pristine.
BASE_PROGRAMS = ("so_reuseport_lb_test",)


def quiet(echo: Callable[[str], None]) -> Callable[[str], None]:
    """``echo`` without make's ``--- target ---`` banner lines."""
    def out(line: str) -> None:
        if "] ---" not in line:
            echo(line)
    return out


def test_cc_lines(req: CasesRequest, src: str, objdir: str, tests_out: str) -> List[str]:
    """The host clang lines that build FreeBSD's ATF programs and ``--test``/``--atf-dir``
    ones into ``tests_out`` against the sysroot of ``src``'s world in ``objdir``."""
    sysroot = str(tree_world.worldtmp(src, objdir))
    return [shlex.join(tree_world.atf_cc_argv(source, f"{tests_out}/{name}", sysroot,
                                              tree=src))
            for name, source in [(n, str(Path(src) / rel)) for n, rel in tree_world.BASE_TESTS]
            + list(req.extra_tests)]


def planned_tests(req: CasesRequest, tests_out: str) -> dict:
    """Program name -> where the world stage puts its binary (a dry run's plan)."""
    out = {n: Path(tests_out) / n for n, _ in tree_world.BASE_TESTS}
    out.update({n: Path(tests_out) / n for n, _ in req.extra_tests})
    return out


def _needs_toolchain(src: str, objdir: str, shared: bool = False) -> bool:
    """Whether a build of ``src`` in ``objdir`` runs kernel-toolchain: not when
    it is done there, nor when the toolchain store of its base has one
    (rxl.tree.toolchain), nor (``shared``: the patched build of this dry run
    plans it and stores it) when the tree descends from the base."""
    if tree_build.toolchain_done(objdir, src) or toolchain.seedable(src, objdir):
        return False
    return not (shared and (toolchain.base_key(src) or not Path(src).exists()))


def _toolchain_note(stages: Sequence[tree_build.Stage], objdir: str) -> List[str]:
    """The comment line a plan without kernel-toolchain carries."""
    if any(s.name == "kernel-toolchain" for s in stages):
        return []
    return [f"# kernel-toolchain: done in {objdir}, or copied from the store of the base "
            "(rxl.tree.toolchain)"]


class Machine(abc.ABC):
    """Where a run's cases run: the run interface (see the module docstring).

    Subclasses set the stage names of their three steps (:attr:`PREPARE`,
    :attr:`RUN`, :attr:`COLLECT`; None: no such stage) and implement
    :meth:`prepare`, :meth:`run_cases`, :meth:`verdict` and, when it has a
    stage, :meth:`collect`; they may narrow :meth:`series`, :meth:`build` and
    :meth:`world`.  Every method is a stage: ``(request, state) -> StageRecord``.
    """

    PREPARE: str = "prepare"
    RUN: str = "run"
    COLLECT: Optional[str] = None

    def stages(self, req: Optional[RunRequest] = None) -> List[Tuple[str, Stage]]:
        """The pipeline of this machine, in order: (stage name, stage); with ``req``
        asking for ``--modules``, the module boot before the report."""
        steps = [("series", self.series), ("build", self.build), ("world", self.world),
                 (self.PREPARE, self.prepare), (self.RUN, self.run_cases)]
        if self.COLLECT:
            steps.append((self.COLLECT, self.collect))
        if req is not None and req.modules:
            steps.append(("modules", self.modules))
        return steps + [("report", self.report)]

    # ---------------------------------------------------------- the interface
    @abc.abstractmethod
    def prepare(self, req: RunRequest, st: RunState) -> StageRecord:
        """Make the machine ready to run the cases."""

    @abc.abstractmethod
    def run_cases(self, req: RunRequest, st: RunState) -> StageRecord:
        """Run the cases there; each run's console (or stream) log into ``st.logs``."""

    def collect(self, req: RunRequest, st: RunState) -> StageRecord:
        """Read each run's results into ``st.runs`` (machines with a :attr:`COLLECT` stage)."""
        raise NotImplementedError

    @abc.abstractmethod
    def verdict(self, req: RunRequest, st: RunState) -> report_mod.Verdict:
        """The verdict on ``st.runs``: which rules this machine can check."""

    def modules(self, req: RunRequest, st: RunState) -> StageRecord:
        """``--modules``: the module boot (rxl.verify.modboot), which only the own guest
        has."""
        raise StageFailed("modules: --modules boots the own guest's MINIMAL kernel; this "
                          "machine has none")

    def case_runs(self, req: RunRequest, st: RunState) -> List[str]:
        """The runs that must hold test cases (a completed one without any fails)."""
        return list(st.runs)

    # ---------------------------------------------------------- shared stages
    def series(self, req: BuildRequest, st: RunState) -> StageRecord:
        """The tree of the patched kernel (rxl.tree.base.resolve): ``--src`` as it
        is when the series is applied there, else a work clone with the series
        applied, or (no ``--src``) the base fetched first, which is then also the
        pristine tree."""
        if not req.series:
            return self.series_absent(req, st)
        try:
            tree, kind = tree_base.resolve(req.src, req.work or str(paths.work_root()),
                                           base_url_override=req.base_url,
                                           dry_run=req.dry_run, lock=req.lock, echo=st.echo)
        except tree_base.TreeError as exc:
            raise StageFailed(f"series: {exc}") from None
        st.src = src = tree.src
        if tree.pristine and req.auto_pristine and not st.pristine_kernel and not st.pristine_src:
            st.pristine_src = tree.pristine
        if req.dry_run and tree.commands:
            return StageRecord("series", "planned", detail=tree.how, commands=tree.commands)
        if kind == tree_base.SrcKind.PLAIN_APPLIED:
            return StageRecord("series", "ok", detail=f"{tree.how}; not a git tree, the "
                               "series' files match patches/")
        head = kernels.git_out(src, "log", "-1", "--format=%h %s").strip()
        changed = kernels.git_out(src, "status", "--porcelain", "--untracked-files=no")
        n_mod = sum(1 for ln in changed.splitlines() if ln.strip())
        base = kernels.series_base()
        n = kernels.git_out(src, "rev-list", "--count", f"{base}..HEAD").strip() if base else "?"
        return StageRecord("series", "ok", commands=tree.commands,
                           detail=f"{tree.how}; HEAD {head}; {n} commits on the base; "
                                  f"{n_mod} uncommitted changes")

    def series_absent(self, req: BuildRequest, st: RunState) -> StageRecord:
        """``--no-series``: ``--src`` as it is, or (none) the base fetched; nothing applied."""
        src = req.src
        cmds: List[str] = []
        if src is None:
            base = tree_patch.parse_base((tree_base.REPO_PATCHES / "BASE").read_text())
            try:
                fetched = tree_base.fetch_base(
                    tree_base.base_url(base.repository, req.base_url), base.commit,
                    str(Path(req.work or paths.work_root()) / f"base-{base.commit[:12]}"),
                    dry_run=req.dry_run, echo=st.echo)
            except tree_base.TreeError as exc:
                raise StageFailed(f"series: {exc}") from None
            src, cmds = fetched.src, fetched.commands
        st.src = src
        v = tree_version.planned_version(src)  # a base not fetched yet: patches/BASE's
        said = v.describe() if v else "a tree that does not say its version"
        return StageRecord("series", "planned" if req.dry_run and cmds else "ok",
                           commands=cmds, detail=f"--no-series: {src} ({said}) as it is; the "
                           "series is not applied and its cases are absent")

    def build(self, req: BuildRequest, st: RunState) -> StageRecord:
        """The patched kernel (unless ``--kernel``), then, unless one is given or
        ``--no-auto-pristine``, the base's kernel from a shared checkout of
        patches/BASE's commit (own objdir); kernels whose stamp matches are reused."""
        rec = self.build_patched(req, st)
        if not st.pristine_kernel and not st.pristine_src and req.auto_pristine:
            base = kernels.series_base()
            if base is None:
                rec.detail += "; no patches/BASE: no pristine kernel"
            elif not kernels.git_out(st.src, "rev-parse", "HEAD").strip() and \
                    not (req.dry_run and not Path(st.src).exists()):  # a planned work clone
                rec.detail += f"; {st.src} is not a git tree: no pristine kernel"
            elif req.dry_run:
                st.pristine_src = str(Path(req.guest_dir) / f"pristine-src-{base[:12]}")
                rec.commands.append(f"git clone -q --shared --no-checkout {st.src} "
                                    f"{st.pristine_src} && git -C {st.pristine_src} "
                                    f"checkout -q --detach {base}")
            else:
                st.pristine_src = kernels.pristine_checkout(
                    st.src, base, Path(req.guest_dir) / f"pristine-src-{base[:12]}", st.echo)
        if st.pristine_src and not st.pristine_kernel:
            rec = self.build_pristine(req, st, rec)
        return rec

    def build_patched(self, req: BuildRequest, st: RunState) -> StageRecord:
        """The patched kernel from ``st.src`` (skipped with ``--kernel``)."""
        if req.kernel:
            if not Path(req.kernel).is_file():
                raise StageFailed(f"build: --kernel {req.kernel}: {missing(req.kernel)}")
            return StageRecord("build", "skipped", detail=f"--kernel {req.kernel}")
        src, objdir = st.src, req.objdir
        stages = tree_build.plan_stages(src, objdir, toolchain=_needs_toolchain(src, objdir))
        cmds = _toolchain_note(stages, objdir) + tree_build.shell_lines(stages)
        kpath = str(tree_build.kernel_path(src, objdir))
        if req.dry_run:
            st.kernel = kpath
            return StageRecord("build", "planned", commands=cmds, detail=f"kernel: {kpath}")
        if kernels.kernel_cached(src, kpath):
            st.kernel = kpath
            return StageRecord("build", "ok", commands=cmds,
                               detail=f"kernel: {kpath} (cached: {kpath}.rxl-stamp matches)")
        try:
            res = tree_build.build_kernel(src, objdir, logdir=req.out, echo=quiet(st.echo))
        except tree_build.BuildError as exc:
            raise StageFailed(f"build: {exc}") from None
        kernels.write_kernel_stamp(src, kpath, "build", res)
        st.kernel = kpath
        cmds.append(f"# {kernels.build_timings(res)}")
        log = str(res[-1].log) if res else ""
        return StageRecord("build", "ok", log=log, commands=cmds, detail=f"kernel: {kpath}")

    def build_pristine(self, req: BuildRequest, st: RunState,
                       rec: StageRecord) -> StageRecord:
        """Build the same kernel config from the base's checkout (own objdir), into ``rec``."""
        src = st.pristine_src
        # One objdir per pristine tree: OBJTOP contains the tree's path, and the
        # kernel-toolchain marker is per objdir.
        objdir = str(Path(req.guest_dir) / f"obj-{Path(src).name}")
        if not (Path(src) / "tools/build/make.py").is_file() and not req.dry_run:
            raise StageFailed(f"build: --pristine-src {src} is not a FreeBSD source tree")
        stages = tree_build.plan_stages(src, objdir, toolchain=_needs_toolchain(
            src, objdir, shared=req.dry_run and rec.status == "planned"))
        rec.commands += _toolchain_note(stages, objdir) + tree_build.shell_lines(stages)
        kpath = str(tree_build.kernel_path(src, objdir))
        st.pristine_kernel = kpath
        rec.detail += f"; pristine kernel: {kpath}"
        if req.dry_run:
            return rec
        if kernels.kernel_cached(src, kpath):
            rec.detail += " (cached)"
            return rec
        try:
            res = tree_build.build_kernel(src, objdir, logdir=str(Path(req.out) / "pristine"),
                                          echo=quiet(st.echo))
        except tree_build.BuildError as exc:
            raise StageFailed(f"build: pristine: {exc}") from None
        rec.detail += "; pristine: " + kernels.build_timings(res)
        kernels.write_kernel_stamp(src, kpath, "build: pristine", res)
        return rec

    def world(self, req: RunRequest, st: RunState) -> StageRecord:
        """The guest userland (skipped while its stamp matches) and the ATF programs."""
        src, objdir = st.src, req.objdir
        tests_out = str(st.stage_dir / "tests")
        cmds = tree_world.shell_lines(src, objdir) + test_cc_lines(req, src, objdir, tests_out)
        missing = tree_world.missing_atf_headers(src)
        note = (f"tree lacks {', '.join(missing)}: generated equivalents go to libatf-c's "
                "objdir" if missing else "")
        if req.dry_run:
            st.world = tree_world.world_outputs(src, objdir)
            st.tests = planned_tests(req, tests_out)
            return StageRecord("world", "planned", commands=cmds, detail=note)
        log = str(Path(req.out) / "world-build.log")
        try:
            r = tree_world.build_world(src, objdir, logdir=req.out, force=req.rebuild_world,
                                       echo=quiet(st.echo))
            st.world = r["outputs"]
            st.tests = tree_world.build_tests(src, objdir, tests_out, logdir=req.out,
                                              extra_sources=req.extra_tests,
                                              echo=quiet(st.echo))
        except RxlError as exc:  # a build that failed, a tool that is missing
            raise StageFailed(f"world: {exc}") from None
        detail = ("up to date, skipped" if r["skipped"] else "built") + (f"; {note}" if note
                                                                          else "")
        return StageRecord("world", "ok", log=log, commands=cmds, detail=detail)

    def report(self, req: RunRequest, st: RunState) -> StageRecord:
        """The verdict (:meth:`verdict`, the module boot's rule and the host sysctls'
        rule, :mod:`rxl.verify.hostsysctl`), and report.json, junit.xml and report.txt."""
        out = Path(req.out)
        files = f"{out}/report.json, {out}/junit.xml, {out}/report.txt"
        if req.dry_run:
            return StageRecord("report", "planned", detail=files)
        st.verdict = self.verdict(req, st)
        if not req.series:
            for run in st.runs.values():
                run.notes.insert(0, "series: not applied (--no-series): the series' cases "
                                    "are absent; FreeBSD's own must pass")
        extra = modboot.reasons(st.runs) + hostsysctl.reasons(st.runs)
        if extra:
            st.verdict.ok = False
            st.verdict.reasons.extend(extra)
        (out / "report.json").write_text(json_text(st))
        (out / "junit.xml").write_text(report_mod.to_junit(st.runs,
                                                           need_cases=self.case_runs(req, st)))
        (out / "report.txt").write_text(report_mod.table(st.runs, st.verdict, st.fallbacks))
        return StageRecord("report", "ok", log=str(out / "report.txt"), detail=files)
