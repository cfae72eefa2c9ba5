"""The stages of ``rxl run``, carried out in order by :class:`Runner`.

series -> build -> world -> image -> boot -> parse -> report: each stage
returns a :class:`~rxl.verify.job.StageRecord` or raises
:class:`~rxl.verify.job.StageFailed`; :meth:`Runner.run` times them, writes
``<out>/stage-<name>.log`` per stage, and at the first failure writes
report.json with a failed verdict naming the stage's error.  With
``dry_run`` every stage only plans: its commands are printed, nothing runs.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Dict, List, Optional

import click

from rxl.verify import parse as parse_mod
from rxl.verify import report as report_mod
from rxl.verify.job import (BASE_PROGRAMS, RunOptions, StageFailed, StageRecord, boots,
                            echo_err, guest_config, one_line)
from rxl.verify.kernels import (REPO_PATCHES, build_timings, git_out, is_git_toplevel,
                                kernel_cached, pristine_checkout, series_base, unapplied_files,
                                write_kernel_stamp)


class Runner:
    """Carries out the stages; each method returns a StageRecord or raises StageFailed."""

    def __init__(self, opts: RunOptions, echo: Callable[[str], None] = echo_err):
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
        head = (git_out(src, "log", "-1", "--format=%h %s").strip() if is_git else "") \
            or "not a git tree"
        changed = git_out(src, "status", "--porcelain", "--untracked-files=no") if is_git else ""
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
            n = git_out(src, "rev-list", "--count", f"{base}..HEAD").strip()
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
            elif not git_out(self.o.src, "rev-parse", "HEAD").strip():
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
        rec.detail += "; pristine: " + build_timings(res)
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
        cmds.append(f"# {build_timings(res)}")
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
                    raise StageFailed(f"{name}: {one_line(exc)}") from None
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
