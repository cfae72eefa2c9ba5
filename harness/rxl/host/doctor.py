"""What the host needs for every stage, how to check it, how to install it.

``rxl doctor`` reads :data:`NEEDS`: one :class:`Need` per tool, header or
file a stage uses, with the Debian package that provides it and the stages
that need it. ``--install`` (as root) runs ``apt-get update`` once, then one
``apt-get install -y`` of every missing package; on Debian 12 a QEMU older
than :data:`QEMU_WANT` comes from bookworm-backports, whose line it writes
first and says so, with the undo (:func:`install_commands`).

Where the list comes from:

* The argv builders of the stages (a unit test scans them and checks every
  program they start is here): ``git`` (series, tree), ``flock`` and ``env``
  (every make.py run), ``python3`` (make.py), the cross tools of
  ``--cross-bindir=/usr/lib/llvm-16/bin`` (clang, clang++, clang-cpp, ld.lld; a 15
  tree's is ``/usr/lib/llvm-19/bin``, rxl.tree.version)
  and ``llvm-readelf-16`` (image), ``qemu-system-x86_64`` (boot), ``gdb`` and
  ``nm`` (kcount), ``cc`` (the userspace cores), ``mandoc`` and ``perl``
  (series check: ``mandoc -Tlint`` and ``tools/build/checkstyle9.pl``),
  ``cp``/``mv``/``mkdir`` (rig kernel cache), ``valgrind`` and
  ``callgrind_annotate`` (``make bench-core``), ``clang`` with its BPF target
  and libbpf's headers (``rxl bench accept --setup ebpf-deal`` / ``ebpf-numa-rr``).
* What make.py's bootstrap on Linux needs and no argv shows: ``bmake``, lex
  and yacc (``flex``, ``bison``; a fresh Debian 12 failed kernel-toolchain
  with ``lex: not found``), and libarchive's and libbz2's headers
  (``libarchive-dev``, ``libbz2-dev``), which the bootstrap tools include.
* The host tools make.py's bootstrap links into its temporary tree
  (:data:`MAKE_PY_HOST_TOOLS`): a bare Debian 12 root failed
  kernel-toolchain with "Cannot find host tool 'time' in PATH" (
  docs/results/cold-run.md); the ones outside Debian's Essential set are
  on the list (``time``, ``bzip2``, ``xz-utils``, ``patch``).
* OVMF: QEMU's UEFI firmware (``ovmf``, :data:`rxl.guest.qemu.OVMF_CANDIDATES`).
* QEMU at least :data:`QEMU_WANT` (8.0): the default guest's NIC is QEMU's igb
  (new in QEMU 8.0), behind a ``pxb-pcie`` bridge with ``_PXM``
  (docs/results/guest-numa.md, measured with 10.0.2). Debian 12 ships 7.2, so
  on Debian 12 ``--install`` adds the ``bookworm-backports`` suite beside the
  machine's own Debian mirror (:func:`backports_source`, it prints the line
  and the undo) and installs ``qemu-system-x86`` from it (QEMU 10.0). QEMU
  7.2 (:data:`QEMU_MIN`) still runs the e1000e shapes (``--target
  guest-e1000e``); q35 takes at most 288 vCPUs there.
* ``--for bench`` adds what no package installs for the eBPF setups of
  ``rxl bench accept``: root (or CAP_BPF and CAP_NET_ADMIN) and Linux >= 5.12
  (:mod:`rxl.bench.ebpf_host`).
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from rxl.bench import ebpf_host
from rxl.guest import qemu
from rxl.tree import kyuaworld

#: Oldest QEMU any guest shape runs on (the e1000e shapes; Debian 12's QEMU).
QEMU_MIN: Tuple[int, int] = (7, 2)
#: QEMU the default guest shape needs: its igb NIC's (rxl.guest.qemu.NIC_MIN_QEMU).
QEMU_WANT: Tuple[int, int] = qemu.NIC_MIN_QEMU["igb"]
#: Debian release whose own QEMU is older than :data:`QEMU_WANT`, and the suite
#: that has a newer one (bookworm-backports: qemu-system-x86 1:10.0.2, 2026-12).
BACKPORTS = {"bookworm": "bookworm-backports"}
#: The file ``--install`` writes the backports line to (and the undo removes).
BACKPORTS_LIST = "/etc/apt/sources.list.d/rxl-{suite}.list"
#: Debian's archive key (package debian-archive-keyring, on every Debian 12).
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
#: The mirror when no source line names the release's main suite.
DEBIAN_MIRROR = "http://deb.debian.org/debian"
#: The cross tools' directory (rxl.tree.build.DEFAULT_CROSS_BINDIR).
CROSS_BINDIR = "/usr/lib/llvm-16/bin"


@dataclass(frozen=True)
class Need:
    """One thing a stage needs on the host.

    ``name``: the program (argv[0] basename), header or file; ``check``:
    ``bin:PROG`` (on PATH), ``path:ABS`` (a file), ``ovmf`` (any of
    rxl.guest.qemu.OVMF_CANDIDATES), ``py:MODULE`` (importable),
    ``ebpf:privilege`` / ``ebpf:kernel`` (rxl.bench.ebpf_host), ``kyua:registry``
    (the SQLite amalgamation's npm tarball cached or the registry reachable,
    rxl.tree.kyuaworld.registry_problem); ``package``:
    the Debian package (``pip:NAME`` for a Python package, ``pkg:NAME`` a
    FreeBSD package, ``base:`` FreeBSD's base system, ``sys:`` no package:
    how the host runs or what it reaches); ``stages``: who
    needs it; ``why``: a few words; ``mode``: the way to run that needs it
    (:data:`MODES`); ``backport``: install it from the release's
    :data:`BACKPORTS` suite where the host's release is listed there.
    """

    name: str
    check: str
    package: str
    stages: Tuple[str, ...]
    why: str = ""
    mode: str = "guest"
    backport: bool = False


#: Ways to run (``rxl doctor --for``): ``guest``: rxl run with the own QEMU
#: guest (over SSH by default, so paramiko too); ``ssh``: rxl run --target (the
#: guest's build tools and paramiko, no QEMU or OVMF: Need.mode ``qemu``);
#: ``bhyve``: rxl vm --start on a FreeBSD host (only bhyve's own needs);
#: ``bench``: rxl bench accept's eBPF setups (the guest's needs, privilege
#: and the kernel).
MODES = ("guest", "ssh", "bhyve", "bench")

#: The host tools FreeBSD's ``tools/build/Makefile`` (``host-symlinks``,
#: the list ``_host_tools_to_symlink`` at the base 2f2a4162bbb9, plus
#: ``/bin/bash``, which it links as ``sh`` on Linux) finds on PATH during
#: kernel-toolchain, each with the Debian 12 package that has it.
MAKE_PY_HOST_TOOLS = {
    **dict.fromkeys(("basename", "chmod", "chown", "comm", "cp", "date", "dd", "dirname",
                     "echo", "env", "false", "fmt", "head", "id", "ln", "ls", "mkdir",
                     "mv", "nice", "rm", "sleep", "stat", "tee", "touch", "tr", "true",
                     "uname", "uniq", "wc"), "coreutils"),
    "bzip2": "bzip2", "bunzip2": "bzip2", "cmp": "diffutils", "find": "findutils",
    "gzip": "gzip", "gunzip": "gzip", "hostname": "hostname", "patch": "patch",
    "sh": "dash", "bash": "bash", "time": "time", "unxz": "xz-utils", "xz": "xz-utils",
    "which": "debianutils",
}
#: Debian's Essential packages among those (``Essential: yes``: on every
#: Debian system, debootstrap's minbase included), not listed one by one.
DEBIAN_ESSENTIAL = frozenset({"coreutils", "diffutils", "findutils", "gzip", "hostname",
                              "dash", "bash", "debianutils"})


NEEDS: Tuple[Need, ...] = (
    Need("git", "bin:git", "git", ("series", "tree", "build"), "clone, apply the series"),
    Need("flock", "bin:flock", "util-linux", ("build", "world"), "the build lock"),
    Need("env", "bin:env", "coreutils", ("build", "world"), "MAKEOBJDIRPREFIX for make.py"),
    Need("cp", "bin:cp", "coreutils", ("learn",), "rig kernels into the cache"),
    Need("mv", "bin:mv", "coreutils", ("learn",), "rig kernels into the cache"),
    Need("mkdir", "bin:mkdir", "coreutils", ("learn",), "the rig kernel cache"),
    Need("python3", "bin:python3", "python3", ("build", "world"), "runs tools/build/make.py"),
    Need("cc", "bin:cc", "build-essential", ("test", "build"), "host C compiler"),
    Need("make", "bin:make", "build-essential", ("test",), "the Makefile"),
    Need("bmake", "bin:bmake", "bmake", ("build", "world"), "make.py's bootstrap"),
    Need("lex", "bin:lex", "flex", ("build", "world"), "make.py bootstrap tools"),
    Need("time", "bin:time", "time", ("build", "world"), "make.py's host tools"),
    Need("bzip2", "bin:bzip2", "bzip2", ("build", "world"), "make.py's host tools"),
    Need("xz", "bin:xz", "xz-utils", ("build", "world"), "make.py's host tools"),
    Need("patch", "bin:patch", "patch", ("build", "world"), "make.py's host tools"),
    Need("yacc", "bin:yacc", "bison", ("build", "world"), "make.py bootstrap tools"),
    Need("archive.h", "path:/usr/include/archive.h", "libarchive-dev", ("build", "world"),
         "bootstrap tools link libarchive"),
    Need("bzlib.h", "path:/usr/include/bzlib.h", "libbz2-dev", ("build", "world"),
         "bootstrap tools link libbz2"),
    Need("clang-16", "bin:clang-16", "clang-16", ("build", "world", "learn"),
         "cross compiler"),
    Need("clang", f"path:{CROSS_BINDIR}/clang", "clang-16", ("build", "world", "learn"),
         "--cross-bindir"),
    Need("clang++", f"path:{CROSS_BINDIR}/clang++", "clang-16", ("build", "world"),
         "--cross-bindir"),
    Need("clang-cpp", f"path:{CROSS_BINDIR}/clang-cpp", "clang-16", ("build", "world"),
         "--cross-bindir"),
    Need("ld.lld", f"path:{CROSS_BINDIR}/ld.lld", "lld-16", ("build", "world", "learn"),
         "--cross-bindir linker"),
    Need("ld.lld-16", "bin:ld.lld-16", "lld-16", ("build", "world"), "linker"),
    Need("llvm-ar-16", "bin:llvm-ar-16", "llvm-16", ("build", "world"), "archiver"),
    Need("llvm-readelf-16", "bin:llvm-readelf-16", "llvm-16", ("image",),
         "NEEDED libraries of guest programs"),
    # FreeBSD 15 trees build with their own LLVM 19 (rxl.tree.version): clang-19 has
    # clang, clang++ and clang-cpp in /usr/lib/llvm-19/bin, lld-19 ld.lld there.
    Need("clang-19", "path:/usr/lib/llvm-19/bin/clang", "clang-19", ("build", "world"),
         "cross compiler of FreeBSD 15 trees"),
    Need("ld.lld-19", "path:/usr/lib/llvm-19/bin/ld.lld", "lld-19", ("build", "world"),
         "linker of FreeBSD 15 trees"),
    Need("llvm-ar-19", "bin:llvm-ar-19", "llvm-19", ("build", "world"),
         "archiver of FreeBSD 15 trees"),
    Need("qemu-system-x86_64", "bin:qemu-system-x86_64", "qemu-system-x86",
         ("boot", "learn", "kcount"), f"the guest (>= {QEMU_WANT[0]}.{QEMU_WANT[1]}: igb)",
         mode="qemu", backport=True),
    Need("OVMF", "ovmf", "ovmf", ("boot", "learn", "kcount"), "UEFI firmware", mode="qemu"),
    Need("gdb", "bin:gdb", "gdb", ("kcount",), "records the lookups"),
    Need("nm", "bin:nm", "binutils", ("kcount",), "kernel symbol addresses"),
    Need("mandoc", "bin:mandoc", "mandoc", ("series check",), "mandoc -Tlint"),
    Need("perl", "bin:perl", "perl", ("series check",), "checkstyle9.pl"),
    Need("valgrind", "bin:valgrind", "valgrind", ("bench-core",), "callgrind"),
    Need("callgrind_annotate", "bin:callgrind_annotate", "valgrind", ("bench-core",),
         "callgrind's report"),
    Need("clang (BPF target)", "bin:clang", "clang", ("bench accept eBPF",),
         "builds the eBPF selectors"),
    Need("libbpf.h", "path:/usr/include/bpf/libbpf.h", "libbpf-dev", ("bench accept eBPF",),
         "the eBPF setups' server"),
    Need("python: click", "py:click", "pip:click", ("all",), "the CLI"),
    Need("python: jinja2", "py:jinja2", "pip:jinja2", ("image",), "guest rc templates"),
    Need("python: yaml", "py:yaml", "pip:pyyaml", ("all",), ""),
    Need("python: rich", "py:rich", "pip:rich", ("all",), "progress bars"),
    Need("python: pexpect", "py:pexpect", "pip:pexpect", ("boot",), "the console"),
    Need("BPF privilege", "ebpf:privilege", "sys:root", ("bench accept eBPF",),
         "root, or CAP_BPF and CAP_NET_ADMIN", mode="bench"),
    Need("Linux >= 5.12", "ebpf:kernel", "sys:kernel", ("bench accept eBPF",),
         "BPF atomics with BPF_FETCH", mode="bench"),
    Need("python: paramiko", "py:paramiko", "pip:paramiko", ("boot", "run --target"),
         "SSH: the own guest's SSH transport, SSH targets"),
    Need("autoconf", "bin:autoconf", "autoconf", ("guest up", "run --transport ssh"),
         "OpenSSH's config.h for the guest's sshd (autoheader, autoconf)", mode="qemu"),
    Need("aclocal", "bin:aclocal", "automake", ("guest up", "run --transport ssh"),
         "OpenSSH's m4 macros for its configure", mode="qemu"),
    Need("SQLite amalgamation", "kyua:registry", "sys:network", ("guest up --kyua",),
         "kyua's sqlite3.c: better-sqlite3's npm tarball over HTTPS (or cached)",
         mode="qemu"),
    Need("bhyve", "bin:bhyve", "base:bhyve", ("vm",), "FreeBSD's hypervisor", mode="bhyve"),
    Need("bhyvectl", "bin:bhyvectl", "base:bhyvectl", ("vm",), "", mode="bhyve"),
    Need("BHYVE_UEFI.fd", "path:/usr/local/share/uefi-firmware/BHYVE_UEFI.fd",
         "pkg:edk2-bhyve", ("vm",), "UEFI firmware for bhyve", mode="bhyve"),
)


def for_mode(mode: str, needs: Sequence[Need] = NEEDS) -> List[Need]:
    """The needs of one way to run (:data:`MODES`): ``bhyve`` only its own (a
    FreeBSD host needs none of the Linux build tools), ``guest`` the common ones
    and QEMU's, ``ssh`` the common ones and its own. Raises ValueError for another
    mode."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    if mode == "bhyve":
        return [n for n in needs if n.mode == "bhyve"]
    if mode == "bench":
        return [n for n in needs if n.mode in ("guest", "qemu", "bench")]
    own = "qemu" if mode == "guest" else mode
    return [n for n in needs if n.mode in ("guest", own)
            and not (mode == "ssh" and set(n.stages) <= NOT_FOR_TARGET)]


#: Stages a run against an SSH target never reaches: ``--for ssh`` leaves out
#: the needs that serve only these (gdb, valgrind, mandoc, libbpf ...).
NOT_FOR_TARGET = frozenset({"kcount", "series check", "bench-core", "bench accept eBPF"})


def tool_names(needs: Sequence[Need] = NEEDS) -> set:
    """Program names the list covers (``bin:`` and ``path:`` basenames)."""
    out = set()
    for n in needs:
        if n.check.startswith("bin:"):
            out.add(n.check[4:])
        elif n.check.startswith("path:"):
            out.add(os.path.basename(n.check[5:]))
    return out


@dataclass
class Result:
    """A checked need: present or not, and a note (a version, why it fails)."""

    need: Need
    ok: bool
    note: str = ""

    def install_line(self) -> str:
        """The command that installs it."""
        pkg = self.need.package
        if pkg.startswith("pip:"):
            return f"pip install {pkg[4:]}"
        if pkg.startswith("pkg:"):
            return f"pkg install {pkg[4:]}"
        if pkg.startswith("base:"):
            return "part of FreeBSD's base system (amd64)"
        if pkg == "sys:root":
            return "run as root (or grant CAP_BPF and CAP_NET_ADMIN)"
        if pkg == "sys:kernel":
            return "boot Linux 5.12 or later"
        if pkg == "sys:network":
            return "allow HTTPS to registry.npmjs.org, or copy the tarball (above) there"
        if self.need.backport:
            return (f"rxl doctor --install (on Debian 12: {pkg} from "
                    f"{BACKPORTS['bookworm']})")
        return f"apt-get install -y {pkg}"


def check(needs: Optional[Sequence[Need]] = None, *, mode: str = "guest",
          which: Callable[[str], Optional[str]] = shutil.which,
          isfile: Callable[[str], bool] = os.path.isfile,
          qemu_ver: Callable[[], Optional[Tuple[int, int]]] = qemu.installed_version,
          ovmf: Optional[Callable[[], Optional[str]]] = None,
          registry: Optional[Callable[[], Optional[str]]] = None) -> List[Result]:
    """Check every need (default: those of ``mode``, :func:`for_mode`); a present
    QEMU older than :data:`QEMU_WANT` counts as missing (the note says what
    still runs on it). ``registry``: None when
    kyua's SQLite amalgamation can be had, else why not (default
    rxl.tree.kyuaworld.registry_problem). ``ovmf`` finds the
    firmware (default rxl.guest.qemu.find_ovmf: the path, or None)."""
    ovmf = ovmf or qemu.find_ovmf
    registry = registry or kyuaworld.registry_problem
    needs = for_mode(mode) if needs is None else needs
    out = []
    for n in needs:
        note = ""
        if n.check.startswith("bin:"):
            ok = which(n.check[4:]) is not None
        elif n.check.startswith("path:"):
            ok = isfile(n.check[5:])
        elif n.check == "ovmf":
            fw = ovmf()
            ok, note = fw is not None, fw or ""
        elif n.check in ("ebpf:privilege", "ebpf:kernel"):
            why = (ebpf_host.privilege_problem() if n.check == "ebpf:privilege"
                   else ebpf_host.kernel_problem())
            ok, note = why is None, why or ""
        elif n.check == "kyua:registry":
            why = registry()
            ok, note = why is None, why or ""
        elif n.check.startswith("py:"):
            try:
                importlib.import_module(n.check[3:])
                ok = True
            except ImportError:
                ok = False
        else:  # pragma: no cover - NEEDS holds no other kind
            raise ValueError(f"unknown check {n.check!r}")
        if ok and n.name == "qemu-system-x86_64":
            v = qemu_ver()
            if v is None:
                note = "version unknown"
            else:
                note = f"{v[0]}.{v[1]}"
                if v < QEMU_WANT:
                    ok = False
                    note += (f", the default guest needs >= {QEMU_WANT[0]}.{QEMU_WANT[1]} "
                             "(igb)" + (f"; {QEMU_MIN[0]}.{QEMU_MIN[1]} still runs "
                                        "--target guest-e1000e" if v >= QEMU_MIN else ""))
        out.append(Result(n, ok, note))
    return out


def release(os_release: str = "/etc/os-release") -> str:
    """The host's Debian codename (``VERSION_CODENAME``), or "" (another system,
    or no such file)."""
    try:
        text = open(os_release, encoding="utf-8", errors="replace").read()
    except OSError:
        return ""
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    if fields.get("ID", "").strip('"') != "debian":
        return ""
    return fields.get("VERSION_CODENAME", "").strip('"')


def apt_sources(root: str = "/etc/apt") -> str:
    """The text of every apt source file under ``root`` (sources.list and
    sources.list.d/*.list, *.sources), "" for none."""
    files = [os.path.join(root, "sources.list")]
    d = os.path.join(root, "sources.list.d")
    if os.path.isdir(d):
        files += [os.path.join(d, f) for f in sorted(os.listdir(d))
                  if f.endswith((".list", ".sources"))]
    out = []
    for f in files:
        try:
            out.append(open(f, encoding="utf-8", errors="replace").read())
        except OSError:
            continue
    return "\n".join(out)


def debian_mirror(sources: str, codename: str) -> str:
    """The URI that serves ``codename``'s main suite in ``sources`` (one-line
    ``deb [opts] URI SUITE ...`` or deb822 ``URIs:``/``Suites:`` stanzas), else
    :data:`DEBIAN_MIRROR`. Pure."""
    for line in sources.splitlines():
        words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
        if len(words) >= 3 and words[0] == "deb" and words[2] == codename:
            return words[1]
    for stanza in re.split(r"\n\s*\n", sources):
        f = {}
        for line in stanza.splitlines():
            if ":" in line and not line.lstrip().startswith("#"):
                k, v = line.split(":", 1)
                f[k.strip().lower()] = v.split()
        if codename in f.get("suites", []) and f.get("uris") \
                and "deb" in f.get("types", ["deb"]):
            return f["uris"][0]
    return DEBIAN_MIRROR


def has_suite(sources: str, suite: str) -> bool:
    """Whether an apt source line or stanza of ``sources`` names ``suite``. Pure."""
    return any(suite in line.split("#", 1)[0].split() for line in sources.splitlines())


def backports_source(codename: str, sources: str) -> Tuple[str, str]:
    """(file, line) that adds the :data:`BACKPORTS` suite of ``codename`` beside the
    machine's own mirror (:func:`debian_mirror`), signed by Debian's archive key.
    Raises KeyError for a release without one. Pure."""
    suite = BACKPORTS[codename]
    return (BACKPORTS_LIST.format(suite=suite),
            f"deb [signed-by={DEBIAN_KEYRING}] {debian_mirror(sources, codename)} {suite} main")


def install_commands(results: Sequence[Result], codename: str = "",
                     sources: str = "") -> List[List[str]]:
    """What ``--install`` runs for the missing: the backports line written (when a
    missing need is a ``backport`` one, the host's release ``codename`` has a
    :data:`BACKPORTS` suite and ``sources`` do not name it yet), ``apt-get
    update``, one ``apt-get install -y`` of every other missing Debian package
    (sorted, once each), and one ``apt-get install -y --no-install-recommends -t
    SUITE`` of the backported ones; [] when nothing is missing. Pure."""
    missing = [r.need for r in results if not r.ok and ":" not in r.need.package]
    suite = BACKPORTS.get(codename)
    bpo = sorted({n.package for n in missing if n.backport and suite})
    pkgs = sorted({n.package for n in missing} - set(bpo))
    if not pkgs and not bpo:
        return []
    cmds = []
    if bpo and not has_suite(sources, suite):
        path, line = backports_source(codename, sources)
        cmds.append(["sh", "-c", f"echo {shlex.quote(line)} > {path}"])
    cmds.append(["apt-get", "update"])
    if pkgs:
        cmds.append(["apt-get", "install", "-y", *pkgs])
    if bpo:
        cmds.append(["apt-get", "install", "-y", "--no-install-recommends", "-t", suite, *bpo])
    return cmds


def backports_note(codename: str, sources: str) -> str:
    """One line saying what ``--install`` adds for the backports and how to undo
    it, or "" when it adds nothing (no such suite for the release, or named already)."""
    suite = BACKPORTS.get(codename)
    if not suite or has_suite(sources, suite):
        return ""
    path, line = backports_source(codename, sources)
    return (f"adding the {suite} suite for QEMU >= {QEMU_WANT[0]}.{QEMU_WANT[1]}: {path}: "
            f"{line}  (undo: rm {path} && apt-get update; QEMU stays until "
            f"apt-get install --allow-downgrades qemu-system-x86/{codename} "
            f"qemu-system-common/{codename} qemu-system-data/{codename})")


def install(results: Sequence[Result], echo: Callable[[str], None] = print,
            run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
            euid: Optional[int] = None, codename: Optional[str] = None,
            sources: Optional[str] = None) -> Optional[str]:
    """Run :func:`install_commands` as root; None on success, else a one-line reason.
    ``codename`` / ``sources``: the host's (default :func:`release`,
    :func:`apt_sources`). Says first what it adds to apt's sources and the undo
    (:func:`backports_note`).

    Not root (or no apt-get): nothing runs, the reason gives the exact
    ``sudo`` lines to type.
    """
    codename = release() if codename is None else codename
    sources = apt_sources() if sources is None else sources
    cmds = install_commands(results, codename, sources)
    if not cmds:
        return None
    if cmds[0][0] == "sh":
        echo(backports_note(codename, sources))
    euid = os.geteuid() if euid is None else euid
    if euid != 0 or shutil.which("apt-get") is None:
        return "not root (or no apt-get): run  " + "  &&  ".join(
            "sudo " + shlex.join(c) for c in cmds)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for c in cmds:
        echo(f"running: {shlex.join(c)}")
        if run(c, env=env).returncode != 0:
            return f"{shlex.join(c)} failed"
    return None


def install_missing(results: Sequence[Result], mode: str = "guest",
                    echo: Callable[[str], None] = print,
                    recheck: Optional[Callable[[], List[Result]]] = None
                    ) -> Tuple[List[Result], Optional[str]]:
    """``rxl doctor --install``: :func:`install` what ``results`` lack, then check
    again (``recheck``, default :func:`check` of ``mode``). Returns (the results
    now, None), or (``results`` unchanged, the one-line reason) when the install
    did not run or failed. Nothing runs when nothing is missing."""
    missing = [r for r in results if not r.ok]
    if not missing:
        return list(results), None
    why = install(missing, echo=echo)
    if why:
        return list(results), why
    return (recheck or (lambda: check(mode=mode)))(), None


def row(r: Result) -> str:
    """One line of ``rxl doctor``: ok/MISSING, name, stages, note, how to install."""
    return (f"{'ok     ' if r.ok else 'MISSING'}  {r.need.name:20s} "
            f"{', '.join(r.need.stages):24s} {r.note or r.need.why}"
            + ("" if r.ok else f"  [{r.install_line()}]"))


def advice(missing: Sequence[Result], python: str = "python3",
           codename: Optional[str] = None, sources: Optional[str] = None) -> List[str]:
    """What to type for the missing: the apt-get line (with the backports line
    first where :func:`install_commands` adds one, and what it adds) and the pip
    line, if any. ``codename`` / ``sources`` as :func:`install`."""
    codename = release() if codename is None else codename
    sources = apt_sources() if sources is None else sources
    out = []
    cmds = install_commands(missing, codename, sources)
    if cmds and cmds[0][0] == "sh":
        out.append(backports_note(codename, sources))
    if cmds:
        out.append("install: " + " && ".join(shlex.join(c) for c in cmds))
    pip = sorted({r.need.package[4:] for r in missing if r.need.package.startswith("pip:")})
    if pip:
        out.append(f"python packages: {python} -m pip install {' '.join(pip)}")
    return out
