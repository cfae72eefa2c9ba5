"""The smallest guest userland: plan (pure) and build (impure) with make.py.

What is built (measured on a 2-core host):

* after ``kernel-toolchain`` (run by :mod:`rxl.tree.build`, marker
  ``<objdir>/.kernel-toolchain.done``), the ``_includes`` stage, then
* ``buildworld -DWORLDFAST`` with the library lists narrowed to what the
  guest programs need (:data:`PREBUILD_LIBS`, :data:`GENERIC_LIBS`) and
  ``SUBDIR_OVERRIDE`` = :data:`SUBDIRS` (rtld, sh, init, reboot, sysctl,
  ifconfig, timeout, sleep, date and the loaders under ``stand``);
* the ATF test programs, compiled and linked statically by the host clang
  against the world's sysroot (``<objtop>/tmp``), see :func:`atf_cc_argv`.

Every make.py run is wrapped in ``flock <lock>`` (the tree and objdir are
shared with the kernel builds).

The tree snapshots this was written against lack two generated ATF headers
(``contrib/atf/config.h``, ``contrib/atf/atf-c/defs.h``; a release tree has
them). :func:`ensure_atf_headers` detects that, says so, and writes
equivalents into libatf-c's *object* directory (never into the tree), with
the values a FreeBSD build uses; libatf-c's Makefile has ``-I.`` (its objdir)
on the include path, and its ``INCS`` install finds ``defs.h`` there too.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from rxl import paths
from rxl.cli.options import missing, read_limited
from rxl.errors import BadOption, DataError, HostError, quoted, show
from rxl.tree import build as tree_build
from rxl.tree import snapshot, userland
from rxl.tree import version as tree_version
from rxl.tree.build import (DEFAULT_LOCK, DEFAULT_OBJDIR, BuildError, Stage, StageResult,
                            locked_argv, make_py_argv)

#: Directories built by buildworld's SUBDIR_OVERRIDE: what the guest's boot
#: and /etc/rc need, plus the loaders (stand/efi/loader_simp).
SUBDIRS: Tuple[str, ...] = (
    "libexec/rtld-elf", "bin/sh", "sbin/init", "sbin/reboot", "sbin/sysctl",
    "sbin/ifconfig", "bin/timeout", "bin/sleep", "bin/date", "stand",
    # a module boot (rxl.verify.modboot): kldload the NIC driver, kldstat on failure
    "sbin/kldload", "sbin/kldstat",
)
#: Libraries with dependents (Makefile.inc1 ``_prebuild_libs``), narrowed to
#: the NEEDED closure of :data:`SUBDIRS` (sh: edit->tinfow; init: util,
#: crypt; ifconfig: m, util, 80211->sbuf,bsdxml, jail, nv).
PREBUILD_LIBS: Tuple[str, ...] = (
    "lib/libmd", "lib/libcrypt", "lib/libutil", "lib/ncurses/tinfo",
    "lib/libnv", "lib/libjail", "lib/libsbuf", "lib/libexpat", "lib/msun",
    # 15's so_reuseport_lb_test links libpthread (tests/sys/netinet/Makefile
    # LIBADD.so_reuseport_lb_test= pthread): libthr, installed as libpthread too.
    "lib/libthr",
)
#: The Makefile whose ``LIBADD.<program>`` lines name what an ATF program links.
TESTS_MAKEFILE = "tests/sys/netinet/Makefile"
#: Makefile.inc1 ``_generic_libs``, narrowed likewise, plus libatf-c.
GENERIC_LIBS: Tuple[str, ...] = (
    "lib/libedit", "lib/lib80211", "lib/libifconfig", "lib/atf/libatf-c",
)
#: ATF's version in contrib/atf (NEWS: "Changes in version 0.22").
ATF_VERSION = "0.22"
#: Generated headers a release tree has and the snapshot lacks.
ATF_GENERATED = ("contrib/atf/config.h", "contrib/atf/atf-c/defs.h")
#: Target triple and host clang for a tree that does not say its version (the 14
#: base's); a tree's own: :func:`compiler_for` (rxl.tree.version).
TARGET_TRIPLE = "x86_64-unknown-freebsd14.0"
DEFAULT_CLANG = "/usr/lib/llvm-16/bin/clang"
#: FreeBSD's own test programs built for the guest: (name, source in tree).
BASE_TESTS: Tuple[Tuple[str, str], ...] = (
    ("so_reuseport_lb_test", "tests/sys/netinet/so_reuseport_lb_test.c"),
)


#: The series' own ATF tests in this repository (tests/atf/*_test.c).
REPO_ATF_DIR = Path(__file__).resolve().parents[3] / "tests" / "atf"


def series_tests(atf_dir: Optional[str]) -> List[Tuple[str, str]]:
    """(program name, C source) for every ``*_test.c`` in ``atf_dir`` (sorted).

    ``''`` (or None) means no series tests: []. A directory that does not
    exist or holds no ``*_test.c`` is an error (rxl.errors.BadOption naming
    ``--atf-dir``): the series' own tests must never drop out of the verdict
    silently.
    """
    if not atf_dir:
        return []
    d = Path(atf_dir)
    if not d.is_dir():  # missing, a loop, or said to be what it is
        raise BadOption(f"{atf_dir}: {missing(d, 'directory')} ('' for no series tests)", "--atf-dir")
    found = [(p.stem, str(p)) for p in sorted(d.glob("*_test.c"))]
    if not found:
        raise BadOption(f"{atf_dir}: no *_test.c in it ('' for no series tests)", "--atf-dir")
    return found


#: A test program's name, as ``--test NAME=PATH`` gives one and an ``--atf-dir``
#: file's name (``NAME.c``) does: a plain file name. It is the program's file
#: in the guest and a word of the guest's rc (``for p in ...; do``) and of the
#: build's commands, unquoted: ``a;reboot_test`` would run ``reboot_test``.
PROGRAM_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: :data:`PROGRAM_NAME` in a message's words.
PROGRAM_NAME_RULE = "a plain file name (letters, digits, '_', '.', '-')"
#: What every ATF C test program defines: its list of cases, which libatf-c's
#: main() calls (atf-c/macros.h). A source without it cannot link.
ATF_TCS = "ATF_TP_ADD_TCS"


def atf_source_reason(source: str, suffix_hint: Optional[str] = None) -> Optional[str]:
    """Why ``source`` is no C source of an ATF test program that would build,
    or None: not a regular file (:func:`rxl.cli.options.missing`: a FIFO, a
    directory, a symlink loop each said to be one), with ``suffix_hint`` not
    named ``.c`` (the hint says why it must be), not text (not UTF-8, NUL
    bytes), or no :data:`ATF_TCS`. The one check of a test source, before
    the builds (the compiler needs the built tree's headers): ``--test``'s
    (rxl.verify.preflight.check_test_source) and every program of an
    ``--atf-dir`` (:func:`check_atf_dir`). The reason does not name the path."""
    p = Path(source)
    if not p.is_file():
        return missing(p) + (" (a C source)" if p.exists() else "")
    if suffix_hint is not None and p.suffix != ".c":
        return f"not a C source ({suffix_hint})"
    try:
        text = read_limited(source, "an ATF C test source", text=True).decode("utf-8")
    except DataError as exc:  # "<path>: why": the why alone
        said = str(exc)
        return said[len(show(source)) + 2:] if said.startswith(f"{show(source)}: ") else said
    except OSError as exc:
        return exc.strerror or str(exc)
    if ATF_TCS not in text:
        return (f"no {ATF_TCS}: not an ATF C test program (it would fail to link after "
                "the build)")
    return None


def check_atf_dir(atf_dir: Optional[str]) -> List[Tuple[str, str]]:
    """:func:`series_tests` of ``atf_dir``, each program checked as ``--test``'s
    is, before anything runs: its name (the file's, less ``.c``) by
    :data:`PROGRAM_NAME`, no name of FreeBSD's own programs
    (:data:`BASE_TESTS`, built from the tree), and its source by
    :func:`atf_source_reason`. rxl.errors.BadOption naming ``--atf-dir``
    (never ``--test``, which may not be given). The one check of an
    ``--atf-dir`` of ``rxl run`` and ``rxl guest up``."""
    found = series_tests(atf_dir)
    for name, source in found:
        where = show(source)
        if not PROGRAM_NAME.fullmatch(name):
            raise BadOption(f"{where}: the program name {quoted(name)} is not "
                            f"{PROGRAM_NAME_RULE}, as --test NAME must be (it goes unquoted "
                            "into the guest's rc and the build's commands)", "--atf-dir")
        if name in dict(BASE_TESTS):
            raise BadOption(f"{where}: FreeBSD's own program {name} is built from the "
                            "tree; a series test takes another name", "--atf-dir")
        why = atf_source_reason(source)
        if why:
            raise BadOption(f"{where}: {why}", "--atf-dir")
    return found


def objtop(src: str, objdir: str, target: str = "amd64", arch: str = "amd64") -> Path:
    """``<objdir>/<abs src>/<target>.<arch>``: Makefile.inc1's OBJTOP under MAKEOBJDIRPREFIX."""
    return Path(os.path.abspath(objdir)) / os.path.abspath(src).lstrip("/") / f"{target}.{arch}"


def worldtmp(src: str, objdir: str) -> Path:
    """The world sysroot (``WORLDTMP`` = ``<objtop>/tmp``): includes and libs land here."""
    return objtop(src, objdir) / "tmp"


# ---------------------------------------------------------------- ATF headers

def atf_config_h(version: str = ATF_VERSION) -> str:
    """Text of ATF's ``config.h`` as configure would write it on FreeBSD.

    FreeBSD has setenv/unsetenv/putenv, optreset, getcwd(NULL, 0) (dynamic);
    its getopt is not GNU's, and basename/dirname take ``char *`` (libgen.h),
    so HAVE_GNU_GETOPT and HAVE_CONST_{BASE,DIR}NAME stay undefined.
    """
    return "\n".join([
        "/* Generated by rxl (harness/rxl/tree/world.py): the tree lacks",
        " * contrib/atf/config.h; values are those of a FreeBSD build. */",
        "#define HAVE_GETCWD_DYN 1",
        "#define HAVE_OPTRESET 1",
        "#define HAVE_PUTENV 1",
        "#define HAVE_SETENV 1",
        "#define HAVE_UNSETENV 1",
        '#define PACKAGE "atf"',
        '#define PACKAGE_NAME "Automated Testing Framework"',
        f'#define PACKAGE_VERSION "{version}"',
        f'#define PACKAGE_STRING "Automated Testing Framework {version}"',
        '#define PACKAGE_BUGREPORT "atf-discuss@googlegroups.com"',
        '#define PACKAGE_TARNAME "atf"',
        '#define PACKAGE_URL "https://github.com/jmmv/atf/"',
        f'#define VERSION "{version}"',
        "",
    ])


#: Substitutions for defs.h.in: what ATF's configure finds with clang.
ATF_DEFS_SUBST: Dict[str, str] = {
    "ATTRIBUTE_FORMAT_PRINTF": "__attribute__((__format__(__printf__, a, b)))",
    "ATTRIBUTE_NORETURN": "__attribute__((__noreturn__))",
    "ATTRIBUTE_UNUSED": "__attribute__((__unused__))",
}


def atf_defs_h(template: str, subst: Dict[str, str] = ATF_DEFS_SUBST) -> str:
    """Fill ``contrib/atf/atf-c/defs.h.in``'s ``@NAME@`` placeholders.

    Raises ValueError naming any placeholder left unfilled.
    """
    out = template
    for name, value in subst.items():
        out = out.replace(f"@{name}@", value)
    left = sorted(set(re.findall(r"@([A-Z_]+)@", out)))
    if left:
        raise ValueError(f"defs.h.in: no value for {', '.join(left)}")
    return out


def missing_atf_headers(src: str) -> List[str]:
    """Relative paths from :data:`ATF_GENERATED` that ``src`` lacks."""
    return [p for p in ATF_GENERATED if not (Path(src) / p).is_file()]


def ensure_atf_headers(src: str, objdir: str, echo: Callable[[str], None] = print) -> List[Path]:
    """Write stand-ins for missing ATF headers into libatf-c's objdir; say so.

    Returns the paths written (empty if the tree has both headers).
    Raises FileNotFoundError if defs.h is missing and so is defs.h.in.
    """
    missing = missing_atf_headers(src)
    written: List[Path] = []
    if not missing:
        return written
    dest = objtop(src, objdir) / "lib/atf/libatf-c"
    for rel in missing:
        if rel.endswith("config.h"):
            text, outs = atf_config_h(), [dest / "config.h"]
        else:
            tmpl = Path(src) / "contrib/atf/atf-c/defs.h.in"
            if not tmpl.is_file():
                raise FileNotFoundError(f"{tmpl}: missing, cannot generate atf-c/defs.h")
            # atf-c/defs.h for `#include "atf-c/defs.h"` (-I.), defs.h for INCS.
            text, outs = atf_defs_h(tmpl.read_text()), [dest / "atf-c/defs.h", dest / "defs.h"]
        for out in outs:
            out.parent.mkdir(parents=True, exist_ok=True)
            if not out.exists() or out.read_text() != text:
                out.write_text(text)
            written.append(out)
        echo(f"world: the tree lacks {rel} (generated at release time); "
             f"generated an equivalent: {', '.join(map(str, outs))}")
    return written


# ---------------------------------------------------------------- plan

def world_make_vars(subdirs: Sequence[str] = SUBDIRS,
                    prebuild: Sequence[str] = PREBUILD_LIBS,
                    generic: Sequence[str] = GENERIC_LIBS) -> Dict[str, Optional[str]]:
    """Make variables for the narrowed ``buildworld -DWORLDFAST``.

    Values with spaces are single argv elements (no shell quoting needed).
    """
    return {
        "WORLDFAST": None,
        "SUBDIR_OVERRIDE": " ".join(subdirs),
        "_prebuild_libs": " ".join(prebuild),
        "_generic_libs": " ".join(generic),
    }


def plan_world(src: str, objdir: str = DEFAULT_OBJDIR, *, jobs: int = 2,
               lock: Optional[str] = DEFAULT_LOCK) -> List[Stage]:
    """Return the make.py stages of the userland build, in order.

    1. ``world-includes``: ``_includes`` (installs headers into WORLDTMP);
    2. ``world-build``: ``buildworld`` with :func:`world_make_vars`.
    Each argv is ``flock <lock> env MAKEOBJDIRPREFIX=... python3 make.py ...``.
    """
    inc = make_py_argv(src, objdir, ["_includes"], jobs=jobs)
    bw = make_py_argv(src, objdir, ["buildworld"], world_make_vars(), jobs=jobs)
    return [Stage("world-includes", tuple(locked_argv(inc, lock))),
            Stage("world-build", tuple(locked_argv(bw, lock)))]


def compiler_for(src: Optional[str]) -> Tuple[str, str]:
    """(host clang, target triple) for what the harness compiles against ``src``'s world
    (the ATF programs, OpenSSH's configure): the tree's cross compiler and its
    release's triple (``/usr/lib/llvm-19/bin/clang``, ``x86_64-unknown-freebsd15.0``
    for 15.0; for a tree not fetched yet, patches/BASE's release's:
    :func:`rxl.tree.version.planned_version`); :data:`DEFAULT_CLANG`,
    :data:`TARGET_TRIPLE` for a tree that does not say."""
    v = tree_version.planned_version(src) if src else None
    if v is None:
        return DEFAULT_CLANG, TARGET_TRIPLE
    return f"{v.cross_bindir}/clang", v.target_triple


def test_libadd(src: str, program: str) -> List[str]:
    """The libraries ``LIBADD.<program>=`` names in ``src``'s :data:`TESTS_MAKEFILE`
    (``["pthread"]`` for 15's so_reuseport_lb_test), empty when none or no file."""
    try:
        text = (Path(src) / TESTS_MAKEFILE).read_text(errors="replace")
    except OSError:
        return []
    out: List[str] = []
    for m in re.finditer(rf"^LIBADD\.{re.escape(program)}\s*\+?=\s*(.*)$", text, re.M):
        out += [w for w in m.group(1).split() if re.fullmatch(r"[A-Za-z0-9_+-]+", w)]
    return out


def atf_cc_argv(source: str, output: str, sysroot: str, *,
                 clang: Optional[str] = None, triple: Optional[str] = None,
                 tree: Optional[str] = None, extra: Sequence[str] = ()) -> List[str]:
    """argv compiling one ATF C test program, statically, for the guest.

    Links libatf-c as FreeBSD installs it (PRIVATELIB: ``libprivateatf-c``)
    from ``<sysroot>/usr/lib``. Static so the guest needs no libatf-c.so.
    ``clang``/``triple`` None: :func:`compiler_for` ``tree``; with ``tree``, the
    libraries its Makefile adds for the program (:func:`test_libadd`) too.
    """
    dclang, dtriple = compiler_for(tree)
    clang, triple = clang or dclang, triple or dtriple
    if tree:
        extra = list(extra) + [f"-l{lib}" for lib in test_libadd(tree, Path(output).name)]
    return [clang, f"--target={triple}", f"--sysroot={sysroot}", "-fuse-ld=lld",
            "-O2", "-static", "-o", output, source, *extra,
            "-lprivateatf-c"]


# ---------------------------------------------------------------- outputs

@dataclass(frozen=True)
class WorldOutputs:
    """Where the built pieces are. ``sysroot`` holds /lib, /usr/lib for NEEDED lookups."""

    objtop: Path
    sysroot: Path
    loader_efi: Path
    programs: Dict[str, Path]
    #: Other products a guest is staged from (the SSH guest's lua loader).
    others: Tuple[Path, ...] = ()

    def missing(self) -> List[str]:
        """Paths that should exist after a successful world build but do not."""
        paths = [self.loader_efi, *self.others, *self.programs.values()]
        return [str(p) for p in paths if not p.exists()]


#: Guest path -> objdir path (relative to OBJTOP) of each program.
GUEST_PROGRAMS: Dict[str, str] = {
    "/libexec/ld-elf.so.1": "libexec/rtld-elf/ld-elf.so.1",
    "/bin/sh": "bin/sh/sh",
    "/sbin/init": "sbin/init/init",
    "/sbin/reboot": "sbin/reboot/reboot",
    "/sbin/sysctl": "sbin/sysctl/sysctl",
    "/sbin/ifconfig": "sbin/ifconfig/ifconfig",
    "/sbin/kldload": "sbin/kldload/kldload",
    "/sbin/kldstat": "sbin/kldstat/kldstat",
    "/bin/timeout": "bin/timeout/timeout",
    "/bin/sleep": "bin/sleep/sleep",
    "/bin/date": "bin/date/date",
}


def world_outputs(src: str, objdir: str = DEFAULT_OBJDIR) -> WorldOutputs:
    """Expected locations of the world build's products (pure path arithmetic)."""
    top = objtop(src, objdir)
    return WorldOutputs(
        objtop=top, sysroot=top / "tmp",
        loader_efi=top / "stand/efi/loader_simp/loader_simp.efi",
        programs={g: top / rel for g, rel in GUEST_PROGRAMS.items()},
    )


# ---------------------------------------------------------------- run

_STOPPED = re.compile(r"stopped in (\S+)")
_HDR_ERR = re.compile(r"/usr/include/(\S+?\.h):\d+:\d+: error:")


def includes_check_only_failure(log_text: str, src: str) -> Optional[List[str]]:
    """If ``_includes`` failed only in its final ``test-includes`` check, the headers
    that failed it (sorted); else None.

    ``test-includes`` compiles ``#include <h>`` for every sys/net* header; a header
    that is not self-contained fails it *after* every header was installed, so
    the userland build can go on. Any other ``stopped in`` directory -> None.
    """
    top = os.path.abspath(src).rstrip("/")
    # "stopped in <src>" lines are the parents of the failing subdir.
    sub = {d.rstrip("/") for d in _STOPPED.findall(log_text)} - {top}
    others = {d for d in sub if not d.endswith("tools/build/test-includes")}
    if not sub or others:
        return None
    return sorted(set(_HDR_ERR.findall(log_text)))


def build_tests(src: str, objdir: str, outdir: str, *, logdir: str,
                extra_sources: Sequence[Tuple[str, str]] = (),
                echo: Callable[[str], None] = print) -> Dict[str, Path]:
    """Compile :data:`BASE_TESTS` (+ ``extra_sources`` as (name, abs path)) into ``outdir``.

    Returns name -> binary. Raises ``rxl.tree.build.BuildError`` naming the log.
    """

    sysroot = str(worldtmp(src, objdir))
    userland.refresh_headers(src, sysroot, echo)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    built: Dict[str, Path] = {}
    items = [(n, str(Path(src) / rel)) for n, rel in BASE_TESTS] + list(extra_sources)
    for name, source in items:
        binary = out / name
        st = Stage(f"test-{name}", tuple(atf_cc_argv(source, str(binary), sysroot, tree=src)))
        tree_build.run_stage(st, logdir, echo)
        built[name] = binary
    return built


def head_of(src: str, paths: Sequence[str] = ()) -> str:
    """Last commit touching ``paths`` in the tree (``git log -1 -- paths``); "" if not git.

    The userland stamp uses the userland's own directories, so a new kernel
    commit of the series does not force a userland rebuild.
    """
    try:
        return subprocess.run(["git", "-C", src, "log", "-1", "--format=%H", "--", *paths],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


#: The kernel headers the userland installs into its sysroot: include/Makefile
#: copies headers from all over sys/ (sys/sys, sys/netinet, sys/net, the
#: machine's sys/amd64/include and sys/x86/include, its LSUBDIRS), and
#: sys/conf/newvers.sh makes osreldate.h. The series changes sys/netinet/tcp.h
#: (TCP_REUSPORT_LB_CPU), which the ATF programs are compiled against.
SYS_HEADER_PATHS: Tuple[str, ...] = (":(glob)sys/**/*.h", "sys/conf/newvers.sh")
#: Paths whose history decides whether the userland must be rebuilt: its own
#: directories and the sys/ headers it installs (a change to sys/sys/socket.h
#: alone left stale headers in the sysroot until --rebuild-world). Manual
#: pages (``*.1`` .. ``*.9``) are excluded: the series edits getsockopt.2.
USERLAND_PATHS: Tuple[str, ...] = SUBDIRS + PREBUILD_LIBS + GENERIC_LIBS + (
    "lib/libc", "lib/csu", "contrib/atf", "include", "share/mk", "Makefile.inc1",
    ) + SYS_HEADER_PATHS + (":(exclude,glob)**/*.[1-9]",)


def build_world(src: str, objdir: str = DEFAULT_OBJDIR, *, logdir: str = paths.LOGS,
                lock: Optional[str] = DEFAULT_LOCK, jobs: int = 2, force: bool = False,
                echo: Callable[[str], None] = print) -> dict:
    """Run the userland build; skip it when a stamp says the same plan already succeeded.

    Returns ``{"skipped": bool, "stages": [StageResult...], "outputs": WorldOutputs}``.
    Raises ``rxl.tree.build.BuildError`` (naming the stage log) when a stage fails and
    HostError when a product is missing after a successful build.
    """

    if not tree_build.toolchain_done(objdir):
        raise HostError(f"{objdir}: kernel-toolchain not done yet "
                           "(no .kernel-toolchain.done); run the build stage first")
    stages = plan_world(src, objdir, jobs=jobs, lock=lock)
    stamp = objtop(src, objdir) / ".rxl-world.stamp"
    plan_text = ("\n".join(s.shell() for s in stages) + "\n"
                 + head_of(src, USERLAND_PATHS) + "\n")
    outs = world_outputs(src, objdir)
    if not force and stamp.is_file() and stamp.read_text() == plan_text and not outs.missing():
        echo(f"world: up to date ({stamp}), skipped")
        return {"skipped": True, "stages": [], "outputs": outs}
    snapshot.prepare(src, echo)
    ensure_atf_headers(src, objdir, echo)

    results = []
    for st in stages:  # run_stage says started / done, with the expected time
        echo(f"{st.name}: log {Path(logdir) / (st.name + '.log')}")
        t0 = time.monotonic()
        try:
            res = tree_build.run_stage(st, logdir, echo)
        except BuildError as exc:
            bad = (includes_check_only_failure(exc.log.read_text(errors="replace"), src)
                   if st.name == "world-includes" else None)
            if bad is None:
                raise
            echo(f"world-includes: WARNING: headers installed, but the test-includes "
                 f"self-containment check failed for {', '.join(bad) or 'some header'} "
                 f"(see {exc.log}); continuing with the userland build")
            res = StageResult(st.name, exc.rc, time.monotonic() - t0, exc.log,
                              {"test_includes_failed": bad})
        results.append(res)
    missing = outs.missing()
    if missing:
        raise HostError(f"world: built but missing {', '.join(missing)}; "
                           f"see {Path(logdir) / 'world-build.log'}")
    stamp.write_text(plan_text)
    return {"skipped": False, "stages": results, "outputs": outs}


def shell_lines(src: str, objdir: str = DEFAULT_OBJDIR, lock: Optional[str] = DEFAULT_LOCK) -> List[str]:
    """The world stages as copy-pasteable shell lines (for ``--dry-run``)."""
    return tree_build.shell_lines(plan_world(src, objdir, lock=lock))
