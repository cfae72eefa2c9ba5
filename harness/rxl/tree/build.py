"""Building a FreeBSD tree with ``tools/build/make.py`` on a Linux host.

The pure part of this module turns a request ("these targets, these make
variables, this tree, this object directory") into argument vectors; the
impure part runs them one stage at a time, keeps a full log per stage and
shows progress.  Everything that can be unit-tested without a FreeBSD tree
(argv builders, the kernel config text, stage planning) is a pure function.

Facts this module relies on, and where they come from:

* ``tools/build/make.py`` refuses to run unless ``MAKEOBJDIRPREFIX`` is set
  in the *environment* (make.py, ``main()``), and ``Makefile.inc1`` refuses
  it as a make variable, so the argv starts with ``env MAKEOBJDIRPREFIX=``.
* ``--cross-bindir`` names the directory holding ``clang``, ``clang++``,
  ``clang-cpp`` and ``ld.lld`` for target objects; Debian's clang-N has them in
  ``/usr/lib/llvm-N/bin``, and N is what the tree says
  (:attr:`rxl.tree.version.TreeVersion.cross_bindir`: 16 for the 14 base, 19 for
  15.0).
* make.py bootstraps its own bmake under ``$MAKEOBJDIRPREFIX/bmake-install``
  and passes every argument it does not know to that bmake, so ``-j``,
  ``TARGET=`` and ``-DNO_FOO`` go through unchanged.
* The tree snapshots lack files of 4 MiB and more, some of which belong to
  kernel modules (``sys/dev/qlxgbe/ql_fw.c``); the test kernel is therefore
  built with ``NO_MODULES=yes`` (:data:`KERNEL_MAKE_VARS`), and a kernel with
  modules builds only the ones named (``MODULES_OVERRIDE``,
  :mod:`rxl.tree.modules`).
* A flattened snapshot (no executable bits; directories its .gitignore took)
  is repaired before the first stage (:func:`rxl.tree.snapshot.prepare`).
"""

from __future__ import annotations

import filecmp
import mmap
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence, Union

from rxl import paths
from rxl.cli.options import missing
from rxl.errors import BadOption, HostError, show
from rxl.tree import elf as tree_elf
from rxl.tree import modules as tree_modules
from rxl.tree import snapshot
from rxl.tree import version as tree_version
from rxl.tree.kernconf import kernconf_path, write_kernconf
from rxl.tree.progress import StageBar

PathLike = Union[str, "os.PathLike[str]"]

#: Directory of the host's clang/lld for a tree that does not say its LLVM
#: (Debian clang-16, the 14 base's); a tree's own: rxl.tree.version.
DEFAULT_CROSS_BINDIR = "/usr/lib/llvm-16/bin"
#: Where object trees go unless told otherwise (shared with the guest build).
DEFAULT_OBJDIR = paths.OBJDIR
#: Lock file every make.py run and every checkout in the shared tree takes.
DEFAULT_LOCK = paths.LOCK
#: Parallel jobs: the build host has 2 cores, shared.
DEFAULT_JOBS = 2
#: amd64 only: the guest and the host are both amd64.
DEFAULT_TARGET = "amd64"
DEFAULT_TARGET_ARCH = "amd64"
#: Marker a finished kernel-toolchain leaves in the objdir (agreed with the
#: guest/userland build), so the stage runs once per objdir.
TOOLCHAIN_DONE = ".kernel-toolchain.done"
#: The test kernel configuration's name.
DEFAULT_KERNCONF = "RXL"
#: Make variables for buildkernel: no modules (the snapshot lacks some of
#: their sources, and the tests need none of them).
KERNEL_MAKE_VARS: Mapping[str, str] = {"NO_MODULES": "yes"}
#: Make variables for a kernel with modules whose clang would put a
#: ``R_X86_64_REX_GOTPCRELX`` to ``__stack_chk_guard`` in every module
#: (:data:`rxl.tree.version.KMOD_SSP_LLVM`): kern.mk then adds no
#: ``-fstack-protector`` (``MK_SSP``, share/mk/bsd.opts.mk), to the kernel nor
#: its modules, and the modules reference no guard.
NO_SSP_MAKE_VARS: Mapping[str, str] = {"WITHOUT_SSP": "yes"}
#: Why, in one line (dry runs say it).
NO_SSP_WHY = ("clang below 19 reaches __stack_chk_guard through the GOT "
              "(R_X86_64_REX_GOTPCRELX), which the kernel linker does not apply to a module")



def make_py_argv(src: PathLike, objdir: PathLike, targets: Sequence[str],
                 make_vars: Optional[Mapping[str, Optional[str]]] = None, *,
                 jobs: int = DEFAULT_JOBS,
                 cross_bindir: Optional[str] = None,
                 target: str = DEFAULT_TARGET,
                 target_arch: str = DEFAULT_TARGET_ARCH,
                 python: str = "python3") -> list[str]:
    """Return the argv that runs FreeBSD's ``tools/build/make.py``.

    Shape of the result::

        ["env", "MAKEOBJDIRPREFIX=<objdir>", <python>,
         "<src>/tools/build/make.py", "--cross-bindir=<cross_bindir>",
         "TARGET=<target>", "TARGET_ARCH=<target_arch>", "-j<jobs>",
         <make_vars as NAME=value, or -DNAME when the value is None>...,
         <targets>...]

    ``src`` and ``objdir`` are made absolute (make.py changes into the
    source root; a relative objdir would then point elsewhere).  The argv
    runs from any working directory.  ``cross_bindir`` None: the tree's own
    (:func:`rxl.tree.version.cross_bindir_of`).  ``make_vars`` keep their insertion
    order; a value of ``None`` means "defined" (``-DNAME``).

    Raises ``ValueError`` if ``targets`` is empty, ``jobs`` < 1, or a make
    variable name is not a valid identifier (which would let it be parsed
    as a target or an option).
    """
    if not targets:
        raise ValueError("make_py_argv: no targets given")
    if jobs < 1:
        raise ValueError(f"make_py_argv: jobs must be >= 1, got {jobs}")
    srcp = Path(os.path.abspath(os.fspath(src)))
    objp = Path(os.path.abspath(os.fspath(objdir)))
    if cross_bindir is None:
        cross_bindir = tree_version.cross_bindir_of(str(srcp))
    argv = ["env", f"MAKEOBJDIRPREFIX={objp}", python,
            str(srcp / "tools/build/make.py"),
            f"--cross-bindir={cross_bindir}",
            f"TARGET={target}", f"TARGET_ARCH={target_arch}", f"-j{jobs}"]
    for name, value in (make_vars or {}).items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
            raise ValueError(f"make_py_argv: bad make variable name {name!r}")
        argv.append(f"-D{name}" if value is None else f"{name}={value}")
    argv.extend(targets)
    return argv


def locked_argv(argv: Sequence[str], lock: Optional[PathLike] = DEFAULT_LOCK
                ) -> list[str]:
    """Prefix ``argv`` with ``flock <lock>`` (util-linux); ``None``: as is.

    Every make.py run in the shared tree/objdir holds this lock so that two
    builds never interleave in one objdir.
    """
    if lock is None:
        return list(argv)
    return ["flock", os.fspath(lock), *argv]


@dataclass(frozen=True)
class Stage:
    """One make.py run: a name (also the log's file stem) and its argv.

    ``timing`` is the stage's key in ``$RXL_WORK/timings.json``
    (rxl.tree.progress); empty means the name.
    """

    name: str
    argv: tuple[str, ...]
    timing: str = ""

    def shell(self) -> str:
        """The argv as one copy-pasteable shell line."""
        return shlex.join(self.argv)


def toolchain_done(objdir: PathLike, src: Optional[PathLike] = None,
                   target: str = DEFAULT_TARGET,
                   target_arch: str = DEFAULT_TARGET_ARCH) -> bool:
    """True if a kernel-toolchain has completed in ``objdir``.

    The marker :data:`TOOLCHAIN_DONE` says so for the objdir (the agreement
    with the userland build).  The toolchain lives under the source tree's
    own object tree, though, so with ``src`` the object tree of that tree
    must also hold ``toolchain-metadata.mk``, which kernel-toolchain writes
    in its last stage (build-metadata, Makefile.inc1).
    """
    if not (Path(objdir) / TOOLCHAIN_DONE).exists():
        return False
    if src is None:
        return True
    srcabs = os.path.abspath(os.fspath(src)).lstrip("/")
    return (Path(os.path.abspath(os.fspath(objdir))) / srcabs /
            f"{target}.{target_arch}" / "toolchain-metadata.mk").is_file()


def plan_stages(src: PathLike, objdir: PathLike, *,
                kernconf: str = DEFAULT_KERNCONF,
                toolchain: bool = True, jobs: int = DEFAULT_JOBS,
                lock: Optional[PathLike] = DEFAULT_LOCK,
                clean_kernel: bool = False,
                modules: Sequence[str] = ()) -> list[Stage]:
    """Return the stages of a kernel build, in order.

    ``kernel-toolchain`` first when ``toolchain`` is true (the caller passes
    ``not toolchain_done(objdir)``), then ``buildkernel KERNCONF=<kernconf>``
    with :data:`KERNEL_MAKE_VARS`, or, when ``modules`` are named,
    ``MODULES_OVERRIDE=<modules>`` instead of ``NO_MODULES`` (only those
    modules are built, with the kernel), plus :data:`NO_SSP_MAKE_VARS` when the
    tree's clang is below :data:`rxl.tree.version.KMOD_SSP_LLVM` (the 14 base's
    clang 16).  ``clean_kernel`` false adds
    ``-DNO_KERNELCLEAN`` so that a rebuild after a small change recompiles
    only what changed; config(8) still runs, so a new ``sys/conf/files``
    entry is picked up (``-DKERNFAST`` would skip config and miss it).
    """
    stages = []
    # Timed per objdir: the patched and the pristine kernel (own objdirs)
    # differ in what an incremental build has left to do.
    where = "@" + os.path.abspath(os.fspath(objdir))
    if toolchain:
        stages.append(Stage("kernel-toolchain", tuple(locked_argv(
            make_py_argv(src, objdir, ["kernel-toolchain"], jobs=jobs),
            lock)), "kernel-toolchain" + where))
    kvars: dict[str, Optional[str]] = {"KERNCONF": kernconf}
    if modules:
        # a directory under sys/modules, nested ones too (geom/geom_part/geom_part_mbr)
        bad = [m for m in modules if not re.fullmatch(r"[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)*", m)
               or ".." in m.split("/") or "." in m.split("/")]
        if bad:
            raise ValueError(f"plan_stages: bad module name {bad[0]!r}")
        kvars["MODULES_OVERRIDE"] = " ".join(modules)
        if tree_version.cross_llvm_of(os.fspath(src)) < tree_version.KMOD_SSP_LLVM:
            kvars.update(NO_SSP_MAKE_VARS)
    else:
        kvars.update(KERNEL_MAKE_VARS)
    if not clean_kernel:
        kvars["NO_KERNELCLEAN"] = None
    stages.append(Stage(f"buildkernel-{kernconf}", tuple(locked_argv(
        make_py_argv(src, objdir, ["buildkernel"], kvars, jobs=jobs),
        lock)), f"buildkernel-{kernconf}{where}"))
    return stages


def kernel_path(src: PathLike, objdir: PathLike,
                kernconf: str = DEFAULT_KERNCONF,
                target: str = DEFAULT_TARGET,
                target_arch: str = DEFAULT_TARGET_ARCH) -> Path:
    """Where buildkernel leaves the kernel.

    ``<objdir>/<abs src>/<target>.<target_arch>/sys/<kernconf>/kernel``,
    the layout of ``Makefile.inc1`` (``OBJTOP`` under ``MAKEOBJDIRPREFIX``).
    """
    srcabs = os.path.abspath(os.fspath(src)).lstrip("/")
    return (Path(os.path.abspath(os.fspath(objdir))) / srcabs /
            f"{target}.{target_arch}" / "sys" / kernconf / "kernel")


# --------------------------------------------------------------------------
# Running (impure).

_PROGRESS = re.compile(r"^(>>> .*|linking kernel.*|.*\*\*\* \[.*\] Error code.*|"
                       r".*error: .*)$")
#: bmake's line for a failed target; the line before the first one is the
#: cause a failed stage names (e.g. "Cannot find host tool 'time' in PATH").
_MAKE_ERROR = re.compile(r"^\*\*\* \[.*\] Error code")
#: Makefile.inc1's closing line of a kernel build, with its own timing.
_BUILT = re.compile(r"^>>> Kernel\(s\) +\S.* built in (\d+) seconds")


def _default_signals() -> None:
    """Child pre-exec: restore SIGINT/SIGQUIT to their defaults.

    A job started in the background by a non-interactive shell inherits
    SIGINT and SIGQUIT ignored, and bmake's own unit tests, which make.py
    runs while bootstrapping bmake, then fail (cmd-interrupt,
    deptgt-interrupt: measured on this host).
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


class BuildError(HostError):
    """A stage failed; ``log`` names its full log, ``cause`` the output line
    before bmake's first ``*** [target] Error code`` (None if none), cut to
    200 characters."""

    def __init__(self, stage: str, rc: int, log: Path, cause: Optional[str] = None):
        if cause and len(cause) > 200:
            cause = cause[:200] + "..."
        said = f": {cause}" if cause else ""
        super().__init__(f"{stage} failed (exit {rc}){said}; full log: {log}")
        self.stage, self.rc, self.log, self.cause = stage, rc, log, cause


class BuildSetupError(HostError):
    """The build cannot start: a directory it needs cannot be made (one line)."""


def prepare_dirs(objdir: PathLike, logdir: PathLike,
                 lock: Optional[PathLike] = None) -> None:
    """Create the object directory, the log directory and the lock's directory.

    Raises :class:`BuildSetupError` naming the first that cannot be made
    (e.g. a path under a file), before any stage runs.
    """
    dirs = [("object directory", objdir, "--objdir"),
            ("log directory", logdir, "--logdir")]
    if lock is not None:
        dirs.append(("directory of the lock", Path(lock).parent, "--lock"))
    for what, d, opt in dirs:
        try:
            Path(d).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BuildSetupError(f"{what} {d}: cannot create it: {e.strerror} "
                                  f"(set by {opt}, default under $RXL_WORK)"
                                  ) from None


@dataclass
class StageResult:
    """A finished stage: name, exit status, wall seconds, log path.

    ``extra`` holds ``wait_seconds`` (until the first output line, i.e. the
    time spent waiting for the build lock) and, for a kernel,
    ``make_seconds`` (Makefile.inc1's own "built in N seconds").
    """

    name: str
    rc: int
    seconds: float
    log: Path
    extra: dict = field(default_factory=dict)


#: bmake's unit test that times signal delivery.  make.py bootstraps bmake
#: once per objdir with boot-strap's default operation, which runs bmake's
#: unit tests; cmd-interrupt's interrupt-compat races bmake's SIGINT handling
#: against a child's ``sleep 1`` and failed 2 bootstraps in a row of the
#: pristine tree in the cold run of 2026-12-02 (6 of 9 bare runs of the test
#: on this host: "unexpected-ok"), before any FreeBSD code was built.
BMAKE_RACY_TEST = "cmd-interrupt"


def bmake_config(objdir: PathLike) -> str:
    """make.py's configure arguments for the bmake of ``objdir``, as the one
    string it keeps in ``bmake-install/.make-py-config`` and compares
    (tools/build/make.py, bootstrap_bmake())."""
    inst = Path(os.path.abspath(os.fspath(objdir))) / "bmake-install"
    return shlex.join([f"--with-default-sys-path=.../share/mk:{inst / 'share/mk'}",
                       "--with-machine=amd64", "--without-filemon", f"--prefix={inst}"])


def bmake_version(src: PathLike) -> Optional[str]:
    """``_MAKE_VERSION`` of the tree's contrib/bmake/VERSION, or None."""
    try:
        text = (Path(src) / "contrib/bmake/VERSION").read_text()
    except OSError:
        return None
    m = re.search(r"^_MAKE_VERSION=\s*(\d+)", text, re.M)
    return m.group(1) if m else None


def bmake_current(src: PathLike, objdir: PathLike) -> bool:
    """True when make.py would take ``objdir``'s bmake as it is: the same
    version as the tree's and the same configure arguments."""
    inst = Path(objdir) / "bmake-install"
    ver = bmake_version(src)
    try:
        cfg = (inst / ".make-py-config").read_text()
        out = subprocess.run([str(inst / "bin/bmake"), "-r", "-f", "/dev/null", "-V",
                              "MAKE_VERSION"], capture_output=True, text=True).stdout
    except OSError:
        return False
    return ver is not None and out.strip() == ver and cfg == bmake_config(objdir)


def bootstrap_bmake_argvs(src: PathLike, objdir: PathLike) -> list[tuple[Path, list[str]]]:
    """The (working directory, argv) pairs of :func:`bootstrap_bmake`, in order:
    boot-strap's configure into ``<objdir>/bmake-build/obj``, its
    make-bootstrap.sh, the mark that says the unit tests ran, and boot-strap's
    install (which then skips them)."""
    script = str(Path(os.path.abspath(os.fspath(src))) / "contrib/bmake/boot-strap")
    build = Path(os.path.abspath(os.fspath(objdir))) / "bmake-build"
    args = shlex.split(bmake_config(objdir)) + ["--objdir", str(build / "obj")]
    return [(build, ["sh", script, *args, "op=configure"]),
            (build / "obj", ["sh", "./make-bootstrap.sh"]),
            (build / "obj", ["touch", "tested"]),
            (build, ["sh", script, *args, "op=install"])]


def bootstrap_bmake(src: PathLike, objdir: PathLike, logdir: PathLike,
                    echo: Callable[[str], None] = print) -> bool:
    """Bootstrap ``objdir``'s bmake as make.py does, without bmake's unit tests
    (:data:`BMAKE_RACY_TEST`), so that make.py finds it current and uses it.

    Nothing is done (False) when it is current already or the tree has no
    contrib/bmake.  Logs to ``<logdir>/bmake-bootstrap.log``; raises
    :class:`BuildError` naming it when a command fails.
    """
    if bmake_version(src) is None or bmake_current(src, objdir):
        return False
    obj = Path(objdir)
    build, inst = obj / "bmake-build", obj / "bmake-install"
    shutil.rmtree(build, ignore_errors=True)
    shutil.rmtree(inst, ignore_errors=True)
    build.mkdir(parents=True)
    log = Path(logdir) / "bmake-bootstrap.log"
    echo(f"bmake: bootstrapping it for {objdir} without its unit tests "
         f"({BMAKE_RACY_TEST} races a signal; tools/build/make.py then uses it); log {log}")
    with open(log, "w") as fh:
        for cwd, argv in bootstrap_bmake_argvs(src, objdir):
            fh.write(f"# cd {cwd} && {shlex.join(argv)}\n")
            fh.flush()
            rc = subprocess.run(argv, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT,
                                preexec_fn=_default_signals).returncode
            if rc != 0:
                raise BuildError("bmake-bootstrap", rc, log)
    (inst / ".make-py-config").write_text(bmake_config(objdir))
    return True


def _make_py_tree(argv: Sequence[str]) -> Optional[tuple[str, str]]:
    """(src, objdir) of a make.py argv (:func:`make_py_argv`), or None."""
    objdir = next((a.split("=", 1)[1] for a in argv if a.startswith("MAKEOBJDIRPREFIX=")), None)
    script = next((a for a in argv if a.endswith("/tools/build/make.py")), None)
    if objdir is None or script is None:
        return None
    return str(Path(script).parents[2]), objdir


def shell_lines(stages: Sequence[Stage]) -> list[str]:
    """``stages`` as copy-pasteable shell lines (for ``--dry-run``), each make.py
    stage's objdir's bmake bootstrap (:func:`bootstrap_bmake_argvs`) before the first
    stage of that objdir, as :func:`run_stage` runs them. Pure: the bootstrap lines
    are printed whether or not that bmake is current (then they are skipped)."""
    out: list[str] = []
    seen: set[str] = set()
    for st in stages:
        tree = _make_py_tree(st.argv)
        if tree is not None and tree[1] not in seen:
            seen.add(tree[1])
            out.append(f"# bmake bootstrap of {tree[1]} (skipped while its bmake is current)")
            out += [f"cd {shlex.quote(str(cwd))} && {shlex.join(argv)}"
                    for cwd, argv in bootstrap_bmake_argvs(tree[0], tree[1])]
        out.append(st.shell())
    return out


def run_stage(stage: Stage, logdir: PathLike,
              echo: Callable[[str], None] = lambda s: print(s, flush=True)
              ) -> StageResult:
    """Run one stage (:func:`run_stage_once`), a make.py stage after its
    objdir's bmake is bootstrapped (:func:`bootstrap_bmake`)."""
    tree = _make_py_tree(stage.argv)
    if tree is not None:
        bootstrap_bmake(tree[0], tree[1], logdir, echo)
    return run_stage_once(stage, logdir, echo)


def run_stage_once(stage: Stage, logdir: PathLike,
                   echo: Callable[[str], None] = lambda s: print(s, flush=True)
                   ) -> StageResult:
    """Run one stage, teeing output to ``<logdir>/<name>.log``.

    Lines that mark progress (``>>>`` banners of Makefile.inc1, ``linking
    kernel``, errors) go to ``echo``; every line goes to the log. The
    stage's expected time and a bar over its ``--- target ---`` lines come
    from the last run (rxl.tree.progress.StageBar), which this run's time
    and count then replace. Raises :class:`BuildError` on a non-zero exit.
    """
    logdir = Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    log = logdir / f"{stage.name}.log"
    t0 = time.monotonic()
    bar = StageBar(stage.timing or stage.name, echo)
    with open(log, "w") as fh:
        fh.write(f"# {stage.shell()}\n")
        fh.flush()
        proc = subprocess.Popen(stage.argv, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                errors="replace",
                                preexec_fn=_default_signals)
        assert proc.stdout is not None
        first = None
        built = None
        last = cause = None
        for line in proc.stdout:
            fh.write(line)
            if _MAKE_ERROR.match(line):
                cause = cause or last
            elif line.strip() and not line.startswith(("--- ", "bmake[", "make[")):
                last = line.strip()
            if first is None:
                # make.py prints nothing before it holds the lock.
                first = time.monotonic() - t0
            m = _BUILT.match(line)
            if m:
                built = int(m.group(1))
            if line.startswith("--- "):
                bar.advance()
            elif _PROGRESS.match(line.rstrip("\n")):
                echo(f"  [{stage.name}] {line.rstrip()}")
        rc = proc.wait()
        bar.close(ok=rc == 0)
        dt = time.monotonic() - t0
        fh.write(f"# exit {rc} after {dt:.0f} s\n")
    if rc != 0:
        raise BuildError(stage.name, rc, log, cause)
    extra = {"wait_seconds": round(first or 0.0)}
    if built is not None:
        extra["make_seconds"] = built
    return StageResult(stage.name, rc, dt, log, extra)


def build_kernel(src: PathLike, objdir: PathLike = DEFAULT_OBJDIR, *,
                 kernconf: str = DEFAULT_KERNCONF,
                 logdir: PathLike = paths.LOGS,
                 lock: Optional[PathLike] = DEFAULT_LOCK,
                 jobs: int = DEFAULT_JOBS,
                 clean_kernel: bool = False,
                 modules: Sequence[str] = (),
                 echo: Callable[[str], None] = lambda s: print(s, flush=True)
                 ) -> list[StageResult]:
    """kernel-toolchain once, then buildkernel of ``kernconf`` (with ``modules``:
    those modules too, then their link check, :mod:`rxl.tree.modules`).

    A flattened snapshot is repaired first (:func:`rxl.tree.snapshot.prepare`).
    Returns the results of the stages run (the last one's ``extra`` names the
    ``kernel`` and, with modules, ``modules``: name -> .ko path).  Raises
    ``FileNotFoundError`` when ``src`` is no FreeBSD tree,
    :class:`BuildSetupError` when a directory cannot be made, both before any
    stage runs, :class:`BuildError` when a stage fails and
    :class:`rxl.tree.modules.ModuleLinkError` when a module would not load.
    Marks the objdir when kernel-toolchain succeeds.
    """
    if not (Path(src) / "tools/build/make.py").is_file():
        raise FileNotFoundError(f"{src}: no tools/build/make.py, "
                                "not a FreeBSD source tree")
    if kernconf == DEFAULT_KERNCONF and not kernconf_path(src, kernconf).parent.is_dir():
        raise FileNotFoundError(f"{kernconf_path(src, kernconf).parent}: not a "
                                "FreeBSD tree (no sys/amd64/conf)")
    prepare_dirs(objdir, logdir, lock)
    snapshot.prepare(str(src), echo)
    if kernconf == DEFAULT_KERNCONF:
        write_kernconf(src, kernconf)
    from rxl.tree import toolchain  # it reads this module's constants: imported on use
    done = toolchain_done(objdir, src) or toolchain.seed(str(src), str(objdir), echo)
    stages = plan_stages(src, objdir, kernconf=kernconf,
                         toolchain=not done, jobs=jobs,
                         lock=lock, clean_kernel=clean_kernel, modules=modules)
    if done:
        echo("kernel-toolchain: already built in "
             f"{objdir} ({TOOLCHAIN_DONE} present), skipped")
    results = []
    for st in stages:
        echo(f"{st.name}: log {Path(logdir) / (st.name + '.log')}")
        res = run_stage(st, logdir, echo)
        if st.name == "kernel-toolchain":
            (Path(objdir) / TOOLCHAIN_DONE).touch()
            toolchain.save(str(src), str(objdir), echo)
        results.append(res)
    kpath = kernel_path(src, objdir, kernconf)
    if results and results[-1].name.startswith("buildkernel"):
        results[-1].extra["kernel"] = str(kpath)
        if modules:
            results[-1].extra["modules"] = check_modules(src, objdir, kernconf, modules, echo)
    return results


#: Largest kernel file taken, bytes. A FreeBSD amd64 kernel is tens of MiB: this
#: project's RXL kernel of the 15.0 base is 31,455,808 bytes stripped and its
#: ``kernel.full`` (the same with its debug sections, which boots too)
#: 129,664,448 (measured in $RXL_WORK/obj/.../sys/RXL on 2026-12-07; MINIMAL's:
#: 13,486,784 and 49,277,048). Twice the largest of them leaves room for a
#: bigger configuration and keeps the checks, which read the whole file for its
#: version string, at a second or so: a 4 GiB file of holes took them minutes
#: (nc15 fault 18), as console logs (64 MiB) and topology dumps (16 MiB) are capped.
MAX_KERNEL_BYTES = 256 << 20


def check_kernel_file(kernel: PathLike, option: str = "--kernel") -> None:
    """Refuse a kernel to boot that cannot be one, before anything runs: not a
    regular file (missing, a directory, a device), empty, larger than
    :data:`MAX_KERNEL_BYTES`, unreadable, or not a
    FreeBSD amd64 kernel (:attr:`rxl.tree.elf.ElfInfo.freebsd_amd64_kernel`:
    ELF64, x86-64, an executable, FreeBSD's OS/ABI or brand note), or one
    without a kernel's version string (rxl.tree.elf.kernel_version: a FreeBSD
    program is all the above).  The same check for every command and path (the
    own guest's, a target's install). Raises :class:`rxl.errors.BadOption`
    naming ``option`` and saying what the file is."""
    p = Path(kernel)
    if not p.exists():
        raise BadOption(f"{show(kernel)}: {missing(p, 'kernel')}", option)
    if not p.is_file():
        raise BadOption(f"{show(kernel)}: not a regular file, no kernel", option)
    size = p.stat().st_size
    if size == 0:
        raise BadOption(f"{show(kernel)}: an empty file, no kernel", option)
    if size > MAX_KERNEL_BYTES:  # before any read: the version scan reads it all
        raise BadOption(f"{show(kernel)}: {size} bytes, over the {MAX_KERNEL_BYTES >> 20} "
                        "MiB of any FreeBSD kernel (tens of MiB), no kernel", option)
    try:
        info = tree_elf.read_info(p)
        if info is None:  # its first bytes, to say what it is instead
            with open(p, "rb") as f:
                head = f.read(24)
    except OSError as exc:
        raise BadOption(f"{show(kernel)}: {exc.strerror}", option) from None
    if info is None:
        first = head.split(b"\n")[0][:20]
        what = ("an ELF header cut short or damaged" if head[:4] == tree_elf.ELF_MAGIC else
                "not an ELF file (" + (f"text starting '{first.decode()}'"
                                       if first and all(32 <= c < 127 for c in first) else
                                       "its first bytes "
                                       + " ".join(f"{c:02x}" for c in head[:8])) + ")")
        raise BadOption(f"{show(kernel)}: {what}, not a FreeBSD amd64 kernel", option)
    if not info.freebsd_amd64_kernel:
        raise BadOption(f"{show(kernel)}: {info.describe()}, not a FreeBSD amd64 kernel "
                        "(an ELF64 x86-64 executable, OS/ABI FreeBSD or its brand note)",
                        option)
    try:  # mapped, not read: a kernel is tens of MiB, and is read again to boot it
        with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            version = tree_elf.kernel_version(data)
    except (OSError, ValueError) as exc:
        raise BadOption(f"{show(kernel)}: {getattr(exc, 'strerror', None) or exc}",
                        option) from None
    if version is None:  # a FreeBSD program, or a kernel's header alone
        raise BadOption(f"{show(kernel)}: {info.describe()}; it holds "
                        f"{tree_elf.NO_VERSION}: not a FreeBSD kernel", option)


#: A kernel version string's ``TYPE RELEASE`` (sys/conf/newvers.sh: ``FreeBSD
#: 15.0-RELEASE``, ``FreeBSD 15.0-CURRENT``, a rebranding's ``Irid 0.0.2-ALPHA``).
_KERNEL_RELEASE = re.compile(r"(\S+) ([0-9]+)\.([0-9]+)(?:\.[0-9]+)*-")


def check_kernel_release(kernel: str, opt: str, src: Optional[str]) -> None:
    """Refuse a kernel (checked by :func:`check_kernel_file`) of another
    release than the tree's: ``--src``'s param.h when it reads, else
    patches/BASE's ``__FreeBSD_version``; the run boots it with that tree's
    userland and test programs.  A ``FreeBSD N.M-...`` version string must say
    the tree's N.M; a rebranding's (``Irid 0.0.2-ALPHA``, no FreeBSD release)
    is compared with newvers.sh's TYPE and REVISION when ``--src`` gives them,
    else taken as it is.  The one check for every command that boots a given
    kernel with a tree's userland: rxl run, rxl learn (rxl.learn.request.check),
    rxl guest up (rxl.guest.up.check_up), rxl kcount setsockopt
    (rxl.bench.lbsetsock.run).  Raises BadOption naming both releases."""
    p = Path(kernel)
    try:
        with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            version = tree_elf.kernel_version(data)
    except (OSError, ValueError):
        return  # check_kernel_file read it a moment ago; it says what went wrong
    m = _KERNEL_RELEASE.match(version or "")
    if m is None:
        return
    said_tree = _run_release(src)
    if said_tree is None:
        return  # the series stage refuses a missing BASE
    tree, where = said_tree
    fv, want = tree.freebsd_version, tree.release
    said = f"{show(kernel)}: a {m.group(1)} {m.group(2)}.{m.group(3)} kernel ({show(version, 60)})"
    if m.group(1) == "FreeBSD":
        if f"{int(m.group(2))}.{int(m.group(3))}" != want:
            raise BadOption(f"{said}, but {where} is FreeBSD {want} (__FreeBSD_version "
                            f"{fv}): the run boots it with that release's userland and "
                            "test programs; give a kernel built from the tree", opt)
    elif tree.rebranded and tree.revision:
        if m.group(1) != tree.type or not version.startswith(f"{tree.type} {tree.revision}-"):
            raise BadOption(f"{said}, but {where} is {tree.type} {tree.revision} (FreeBSD "
                            f"{want}): the run boots it with that tree's userland and test "
                            "programs; give a kernel built from the tree", opt)


def _run_release(src: Optional[str]):
    """The release a run's userland and test programs are built from, and where
    it is said: ``(version, "--src SRC")`` when --src's param.h reads
    (:func:`rxl.tree.version.version_or_none`; else --src's own check says what
    is wrong with it), else ``(version, "patches/BASE")``
    (:func:`rxl.tree.version.base_version`, a plain FreeBSD release); None when
    neither says (the series stage refuses a missing BASE)."""
    tree = tree_version.version_or_none(src) if src else None
    if tree is not None:
        return tree, f"--src {show(src)}"
    base = tree_version.base_version()
    return None if base is None else (base, "patches/BASE")


def check_tree_release(tree: str, opt: str, src: Optional[str]) -> None:
    """Refuse a tree (checked by rxl.tree.base.check_tree_dir) whose kernel is
    built and booted with another tree's userland (``--pristine-src``) when
    its param.h names another release (N.M of ``__FreeBSD_version``) than
    that userland's: ``--src``'s when it reads, else patches/BASE's, as
    :func:`check_kernel_release` compares a given kernel; or when it names
    none (:func:`rxl.tree.version.read_version`), since its release picks the
    compiler that builds it.  Raises BadOption naming both releases."""
    try:
        v = tree_version.read_version(tree)
    except tree_version.VersionError as exc:
        raise BadOption(f"{show(tree)}: the tree says no release ({exc}), and its "
                        "kernel is booted with the run's userland", opt) from None
    said = _run_release(src)
    if said is None:
        return
    run, where = said
    fv, want = run.freebsd_version, run.release
    if v.release != want:
        raise BadOption(f"{show(tree)}: a FreeBSD {v.release} tree (__FreeBSD_version "
                        f"{v.freebsd_version}), but {where} is FreeBSD {want} "
                        f"(__FreeBSD_version {fv}): the run boots the kernel built from it "
                        "with that release's userland and test programs; give the base's "
                        "tree", opt)


def check_kernel_pair(kernel: str, pristine: str, why: str) -> None:
    """Refuse a ``--pristine-kernel`` that is ``--kernel`` (both checked by
    :func:`check_kernel_file`): the same file (a link) or a byte-identical
    copy (:func:`_same_kernel`). ``why``: what the command would do with it
    (rxl run's verdict, rxl learn's report). Raises BadOption naming
    --pristine-kernel."""
    if not _same_kernel(kernel, pristine):
        return
    same = "" if os.path.abspath(kernel) == os.path.abspath(pristine) \
        else f" ({show(kernel)})"
    what = "the same file as" if os.path.samefile(kernel, pristine) \
        else "a byte-identical copy of"
    raise BadOption(f"{show(pristine)}: {what} --kernel{same}: {why}; give the base's "
                    "kernel", "--pristine-kernel")


def _same_kernel(kernel: str, pristine: str) -> bool:
    """True if the two kernel files (paths already checked as kernels) are
    one file (the same inode: a link) or hold the same bytes (a copy):
    sizes first, then the contents, compared in chunks.  Either way the
    pristine boot would run the patched kernel.  Raises BadOption if one
    cannot be read."""
    if os.path.samefile(kernel, pristine):
        return True
    try:
        return filecmp.cmp(kernel, pristine, shallow=False)
    except OSError as exc:
        raise BadOption(f"{show(pristine)}: {exc.strerror}", "--pristine-kernel") from None


def check_modules(src: PathLike, objdir: PathLike, kernconf: str, modules: Sequence[str],
                  echo: Callable[[str], None] = print) -> dict:
    """The built ``modules`` of ``kernconf`` (name -> .ko path), each checked to link
    against ``kernel.full`` and the modules before it, and to hold only relocation
    types the tree's kernel linker applies (:mod:`rxl.tree.modules`). Raises
    :class:`rxl.tree.modules.ModuleLinkError` naming a module that is missing, has
    symbols nothing defines or a relocation kldload would refuse."""
    kos = {m: str(tree_modules.module_path(str(src), str(objdir), m, kernconf))
           for m in modules}
    absent = [p for p in kos.values() if not Path(p).is_file()]
    if absent:
        raise tree_modules.ModuleLinkError(f"modules: {absent[0]} was not built")
    full = kernel_path(src, objdir, kernconf).with_name("kernel.full")
    bad = tree_modules.undefined_symbols(str(full), list(kos.values()))
    if bad:
        ko, syms = next(iter(bad.items()))
        raise tree_modules.ModuleLinkError(
            f"modules: {Path(ko).name} needs {', '.join(syms[:5])}"
            f"{' ...' if len(syms) > 5 else ''}, which neither the {kernconf} kernel nor a "
            "module loaded before it defines (kldload would fail: a source missing from "
            f"its sys/modules Makefile?)")
    handled, names = tree_modules.tree_relocations(str(src))
    refused = tree_modules.unhandled_relocations(list(kos.values()), handled)
    if refused:
        ko, rels = next(iter(refused.items()))
        said = ", ".join(f"{names.get(t, t)} ({t})" + (f" to {sym}" if sym else "")
                         for t, sym in rels[:3])
        raise tree_modules.ModuleLinkError(
            f"modules: {Path(ko).name} has {said}{' ...' if len(rels) > 3 else ''}: a "
            f"relocation type {tree_modules.ELF_MACHDEP} does not apply (kldload would "
            "fail: \"unexpected relocation type\"; objects of an older compiler or flags "
            "in the objdir? rxl build --modules --clean rebuilds them)")
    echo(f"modules: {', '.join(Path(p).name for p in kos.values())} link against the "
         f"{kernconf} kernel (every undefined symbol defined, every relocation type "
         "one the kernel linker applies)")
    return kos
