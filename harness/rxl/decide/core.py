"""Binding to the C cores under ``sys/``, built as a userspace library.

The library is the kernel's own code: ``sys/net/iflib_spread.c``,
``sys/netinet/in_pcblb_deal.c`` and ``sys/netinet/in_pcblb_learn.c``,
compiled unchanged with ``lib/userspace/rxl_compat.h`` force-included and
the flat entry points of ``lib/userspace/rxlcore.c``.  It is built on first
use (``cc -std=c99 -Wall -Wextra -Werror``) into ``$RXL_BUILD_DIR`` or
``build/`` of the checkout, under a name carrying a hash of its sources,
so a changed source is never served by a stale library.

Errors: :class:`CoreError` when the sources are missing or the compiler
fails (with its output), writes no library or one that does not load
(that file is deleted, never cached), or when the C rejects its input.
There is no fallback to the model: ``--impl model`` asks for it.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import cffi

from rxl import paths
from rxl.cli.options import link_reason, not_a
from rxl.decide import model
from rxl.decide.cpugroup import Topology
from rxl.errors import HostError, UsageError, counted, reason, show

ROOT = Path(__file__).resolve().parents[3]

#: The cores, as the series adds them, and the userspace glue.
CORE_SOURCES = (
    "sys/net/iflib_spread.c",
    "sys/netinet/in_pcblb_deal.c",
    "sys/netinet/in_pcblb_learn.c",
)
CORE_HEADERS = (
    "sys/net/iflib_spread.h",
    "sys/netinet/in_pcblb_deal.h",
    "sys/netinet/in_pcblb_learn.h",
)
GLUE = ("lib/userspace/rxl_compat.h", "lib/userspace/rxlcore.h",
        "lib/userspace/rxlcore.c")

#: Warnings the cores must compile clean under (kernel style, docs/design.md).
CFLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC")

# Kept in step with lib/userspace/rxlcore.h.
_CDEF = """
struct rxl_topo;
struct rxl_learn;
struct rxl_topo *rxl_topo_new(int, const int *, const int *, const int *,
    const int *, const int *);
void rxl_topo_free(struct rxl_topo *);
int rxl_spread(const struct rxl_topo *, const int *, int, int, int,
    unsigned *);
int rxl_deal(const struct rxl_topo *, int, const uint16_t *,
    const uint32_t *, int, uint32_t *, uint16_t *, unsigned *);
unsigned rxl_select(const uint32_t *, int, int, uint32_t, int, int *);
uint32_t rxl_mix(uint32_t);
size_t rxl_deal_scratch_size(const struct rxl_topo *, int, int);
struct rxl_learn *rxl_learn_new(int, int, int);
void rxl_learn_free(struct rxl_learn *);
void rxl_learn_count(struct rxl_learn *, int, uint32_t);
int rxl_learn_roll(struct rxl_learn *, int);
uint64_t rxl_learn_sum(const struct rxl_learn *, uint32_t *);
void rxl_learn_window(const struct rxl_learn *, int, uint32_t *, uint32_t *);
"""

# Tag encoding: sys/netinet/in_pcblb_deal.h.
TAG_NONE = 0xFFFF
TAG_LEARNED = 0x8000


class CoreError(HostError):
    """The C library could not be built or loaded, or refused its input."""


#: The variable naming where the cores' library (and the fuzz targets, the bench
#: server and bench_core) are built.
BUILD_DIR_ENV = "RXL_BUILD_DIR"


def build_dir() -> Path:
    """``$RXL_BUILD_DIR``, else ``build/`` in the checkout; an empty
    ``RXL_BUILD_DIR`` is unset, as an empty ``RXL_WORK`` is. The one reader of the
    variable (the bench server's directory is its ``bench/``).

    Raises :class:`rxl.errors.UsageError` (exit 2, one line naming the variable)
    for a relative path (each directory would build and load a library of its
    own; a bare name would be looked up in the loader's path), a file, a path
    under a file, or a symlink loop or dangling link on the way
    (rxl.cli.options.link_reason): what ``RXL_WORK`` refuses, before anything
    is built."""
    env = os.environ.get(BUILD_DIR_ENV)
    if not env:
        return ROOT / "build"
    if not os.path.isabs(env):
        raise UsageError(f"{BUILD_DIR_ENV} {show(env)}: not an absolute path (every "
                         "command of every directory must find the same build directory)")
    p = Path(env)
    why = link_reason(p)
    if why:
        raise UsageError(f"{BUILD_DIR_ENV} {show(env)}: {why}")
    if p.exists() and not p.is_dir():
        raise UsageError(f"{BUILD_DIR_ENV} {show(env)}: {not_a(p.stat().st_mode, 'directory')} "
                         "(where the C cores are built)")
    anc = paths.existing_ancestor(p)
    if not anc.is_dir():
        raise UsageError(f"{BUILD_DIR_ENV} {show(env)}: cannot be created, {anc} is a file")
    return p


def make_build_dir(path: Optional[Path] = None) -> Path:
    """Create ``path`` (default :func:`build_dir`) and return it.

    Raises CoreError, one line naming the directory and RXL_BUILD_DIR,
    when it cannot be made (e.g. a path under a file).
    """
    d = Path(path) if path is not None else build_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CoreError(f"build directory {d}: cannot create it: {e.strerror}; "
                        "set RXL_BUILD_DIR to a writable directory") from None
    return d


def sources_digest() -> str:
    """12 hex digits of the SHA-256 of the cores' sources, headers and glue and of the compiler
    flags: what names a built library, so a change to any rebuilds it."""
    h = hashlib.sha256()
    for rel in CORE_SOURCES + CORE_HEADERS + GLUE:
        path = ROOT / rel
        if not path.is_file():
            raise CoreError(f"C source {rel} not found under {ROOT}: the "
                            "binding needs a checkout of the repository")
        h.update(rel.encode() + b"\0" + path.read_bytes())
    h.update(" ".join(CFLAGS).encode())
    h.update(" ".join(cc_argv()).encode())
    return h.hexdigest()[:12]


def library_path() -> Path:
    """Where the library for the current sources lives (built or not)."""
    return build_dir() / f"librxlcore-{sources_digest()}.so"


def cc_argv() -> List[str]:
    """The C compiler of the cores as an argv: ``$RXL_CORE_CC`` (the
    sanitizer build of ``make test-asan``), else ``$CC``, split like a
    shell would, else ``cc``.  A variable that is empty or blank is unset,
    as an empty ``RXL_BUILD_DIR`` is (``CC=''`` split to no word, and the
    first flag was run as the compiler).

    Raises :class:`rxl.errors.UsageError` (exit 2, one line naming the
    variable) for a value a shell could not split (``CC='"'``: an unclosed
    quote)."""
    for name in ("RXL_CORE_CC", "CC"):
        value = os.environ.get(name, "")
        if not value.strip():
            continue
        try:
            return shlex.split(value)
        except ValueError as exc:  # No closing quotation, No escaped character
            raise UsageError(f"{name} {show(value)}: cannot be split into a command "
                             f"as a shell would ({exc}); set it to a compiler, or "
                             "unset it for cc") from None
    return ["cc"]


def source_args() -> List[str]:
    """What every userspace build of the cores compiles, after the flags:
    the compat header (force-included), the include paths, the cores and
    the flat entry points of ``rxlcore.c``.  The library, the fuzz targets
    (:mod:`rxl.decide.fuzz`) and the sanitizer build all use this one list."""
    return ["-include", str(ROOT / "lib/userspace/rxl_compat.h"),
            "-I", str(ROOT / "sys"), "-I", str(ROOT / "lib/userspace"),
            *(str(ROOT / s) for s in CORE_SOURCES),
            str(ROOT / "lib/userspace/rxlcore.c")]


def build_argv(out: Path, extra: Sequence[str] = ()) -> List[str]:
    """The compiler command line that builds the library at ``out``."""
    return [*cc_argv(), *CFLAGS, *extra, "-shared", *source_args(),
            "-o", str(out)]


def build(force: bool = False) -> Path:
    """Build the library if the current sources have none; return its path.

    Raises CoreError with the compiler's output on failure.
    """
    out = library_path()
    if out.exists() and not force:
        return out
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    log = out.with_suffix(".log")
    argv = build_argv(tmp)
    make_build_dir(out.parent)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True)
    except OSError as e:
        raise CoreError(f"building the C cores: {argv[0]}: {e.strerror} "
                        f"({e.filename or out.parent}); set CC or "
                        "RXL_BUILD_DIR")
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        log.write_text(shlex.join(argv) + "\n" + proc.stdout + proc.stderr)
        first = next((ln for ln in proc.stderr.splitlines() if ln.strip()),
                     f"exit status {proc.returncode}")
        raise CoreError(f"building the C cores failed: {first} "
                        f"(full output: {log})")
    if not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise CoreError(f"building the C cores: {show(argv[0])} exited 0 but wrote no "
                        f"library ({show(tmp, 4096)}); set CC to a C compiler")
    _load(tmp, argv[0])  # a library that does not load is never kept
    os.replace(tmp, out)
    return out


_ffi = cffi.FFI()
_ffi.cdef(_CDEF)
_lib = None


def _load(path: Path, cc: Optional[str] = None):
    """``path`` loaded (cffi dlopen); one that does not load is deleted, so it
    is never served again, and raises :class:`CoreError`, one line naming the
    compiler that made it."""
    try:
        return _ffi.dlopen(str(path))
    except OSError as e:
        path.unlink(missing_ok=True)
        by = show(cc) if cc is not None else show(" ".join(cc_argv()))
        # cffi: "cannot load library 'P': P: file too short.  Additionally, ..."
        why = str(e).split(".  Additionally,")[0]
        why = why.rsplit(": ", 1)[-1] if ": " in why else why
        raise CoreError(f"building the C cores: {by} made {show(path.name)}, which does not "
                        f"load as a shared library ({show(why)}); deleted it; set CC to a C "
                        "compiler") from None


def lib():
    """The loaded library (built on first use; a cached one that does not
    load is deleted and refused, see :func:`_load`)."""
    global _lib
    if _lib is None:
        _lib = _load(build())
    return _lib


class CTopology:
    """A topology handed to the C as a struct cpu_group tree."""

    def __init__(self, topo: Topology) -> None:
        groups = topo.bfs()
        cpus = [c for g, _ in groups for c in g.cpus]
        self._ptr = lib().rxl_topo_new(
            len(groups),
            _ffi.new("int[]", [p for _, p in groups]),
            _ffi.new("int[]", [g.level for g, _ in groups]),
            _ffi.new("int[]", [g.flags for g, _ in groups]),
            _ffi.new("int[]", [len(g.cpus) for g, _ in groups]),
            _ffi.new("int[]", cpus))
        if self._ptr == _ffi.NULL:
            raise CoreError(f"the C rejected topology {topo.name}")
        self._ptr = _ffi.gc(self._ptr, lib().rxl_topo_free)
        self.topo = topo

    @property
    def ptr(self):
        return self._ptr


def encode_tag(tag: model.Tag) -> int:
    """A :class:`model.Tag` in the kernel's uint16 encoding."""
    if tag.cpu is None:
        return TAG_NONE
    return tag.cpu | (TAG_LEARNED if tag.learned else 0)


class CDeal:
    """Raw output of the C deal: per-CPU entries and the slot array."""

    def __init__(self, ncpu: int, cpuent, slots, nslots: int) -> None:
        self.ncpu = ncpu
        self.cpuent = cpuent
        self.slots = slots
        self.nslots = nslots

    def to_model(self) -> model.Deal:
        ranges: Dict[int, Tuple[int, int]] = {}
        for c in range(self.ncpu):
            e = self.cpuent[c]
            if e:
                ranges[c] = (e >> 16, e & 0xFFFF)
        return model.Deal(self.nslots, ranges,
                          tuple(self.slots[i] for i in range(self.nslots)))


def deal_raw(ctopo: CTopology, tags: Sequence[model.Tag],
             counts: Mapping[int, int], ncpu: Optional[int] = None) -> Optional[CDeal]:
    """Run ``lbdeal()``; None when it builds no map.

    ``counts`` maps CPU -> handshakes (CPUs at or above ``ncpu`` ignored).
    ``ncpu`` (mp_maxid + 1) defaults to the topology's; a larger one has
    absent CPUs at the top, as a fuzz case may (tests/fuzz/).
    Raises CoreError for an empty or oversized group.
    """
    topo = ctopo.topo
    n = len(tags)
    ncpu = topo.ncpu if ncpu is None else ncpu
    ctags = _ffi.new("uint16_t[]", [encode_tag(t) for t in tags] or [0])
    ccounts = _ffi.new("uint32_t[]", ncpu)
    for c, v in counts.items():
        if 0 <= c < ncpu:
            ccounts[c] = v
    cpuent = _ffi.new("uint32_t[]", ncpu)
    slots = _ffi.new("uint16_t[]", max(1, model.SLOTS_PER_MEMBER * n))
    nslots = _ffi.new("unsigned *")
    rc = lib().rxl_deal(ctopo.ptr, n, ctags, ccounts, ncpu, cpuent, slots,
                        nslots)
    if rc < 0:
        raise CoreError(f"lbdeal refused a group of {counted(n, 'member')}")
    if rc == 0:
        return None
    return CDeal(ncpu, cpuent, slots, nslots[0])


def deal(topo: Topology, tags: Sequence[model.Tag],
         counts: Mapping[int, int]) -> Optional[model.Deal]:
    """The C's deal, in the model's shape (see :func:`model.deal`)."""
    if not 0 < len(tags) <= model.MAX_MEMBERS:
        raise ValueError(f"a group holds 1 to {model.MAX_MEMBERS} members, "
                         f"not {len(tags)}")
    raw = deal_raw(CTopology(topo), tags, counts)
    return raw.to_model() if raw is not None else None


def select(d: Optional[CDeal], n: int, cpu: int, h: int) -> Tuple[int, bool]:
    """The lookup's rule: (member index, steered), as :func:`model.select`."""
    if n <= 0:
        raise ValueError("an empty group has no member to select")
    steered = _ffi.new("int *")
    if d is None:
        idx = lib().rxl_select(_ffi.NULL, 0, cpu, h & 0xFFFFFFFF, n, steered)
        return idx, False
    idx = lib().rxl_select(d.cpuent, d.ncpu, cpu, h & 0xFFFFFFFF, n, steered)
    if steered[0]:
        return d.slots[idx], True
    return idx, False


def mix(h: int) -> int:
    """``LBDEAL_MIX()``: the hash mix applied before steering."""
    return lib().rxl_mix(h & 0xFFFFFFFF)


def spread_order(topo: Topology, eligible: Sequence[int],
                 mode: int = model.SPREAD_ON) -> List[int]:
    """``iflib_spread_order()`` (see :func:`model.spread_order`)."""
    ct = CTopology(topo)
    order = _ffi.new("unsigned[]", max(1, len(eligible)))
    n = lib().rxl_spread(ct.ptr, _ffi.new("int[]", list(eligible) or [0]),
                         len(eligible), topo.ncpu, mode, order)
    if n < 0:
        raise CoreError("iflib_spread_order refused its CPU sets or mode "
                        f"{mode}")
    return [order[i] for i in range(n)]


class Windows:
    """``struct lblearn`` driven like :class:`model.Windows`, with the
    kernel's per-CPU handshake counters simulated in ``rxlcore.c``."""

    def __init__(self, ncpu: int, window: int, now: int) -> None:
        p = lib().rxl_learn_new(ncpu, window, now)
        if p == _ffi.NULL:
            raise CoreError("lblearn_init refused its arguments")
        self._p = _ffi.gc(p, lib().rxl_learn_free)
        self.ncpu = ncpu

    def count(self, cpu: int, n: int = 1) -> None:
        lib().rxl_learn_count(self._p, cpu, n & 0xFFFFFFFF)

    def roll(self, now: int) -> bool:
        return bool(lib().rxl_learn_roll(self._p, now))

    def counts(self) -> Dict[int, int]:
        buf = _ffi.new("uint32_t[]", self.ncpu)
        lib().rxl_learn_sum(self._p, buf)
        return {c: buf[c] for c in range(self.ncpu) if buf[c]}

    def window_counts(self, cpu: int) -> Tuple[int, int]:
        last = _ffi.new("uint32_t *")
        cur = _ffi.new("uint32_t *")
        lib().rxl_learn_window(self._p, cpu, last, cur)
        return last[0], cur[0]


def check_argvs(outdir: Path) -> List[List[str]]:
    """Compile lines for each core alone, without and with INVARIANTS, as
    the kernel builds them one file at a time (``make core-check``)."""
    cc = cc_argv()
    out = []
    for src in CORE_SOURCES:
        stem = Path(src).stem
        for extra, suffix in (((), ".o"), (("-DINVARIANTS",), ".inv.o")):
            out.append([*cc, *CFLAGS, *extra,
                        "-include", str(ROOT / "lib/userspace/rxl_compat.h"),
                        "-I", str(ROOT / "sys"), "-c", str(ROOT / src),
                        "-o", str(outdir / (stem + suffix))])
    return out


def check() -> None:
    """Run :func:`check_argvs`; raise CoreError with the first failure."""
    outdir = make_build_dir(build_dir() / "check")
    for argv in check_argvs(outdir):
        print(shlex.join(argv))
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CoreError("core check failed:\n" + proc.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m rxl.decide.core [--dry-run] [--check]``: build the library and
    print its path, or (``--check``) compile each core alone."""
    args = list(sys.argv[1:] if argv is None else argv)
    other = [a for a in args if a not in ("--dry-run", "--check")]
    if other:  # --help too: it would build the library and print its path
        print(f"rxl: {show(other[0])}: not an argument (python -m rxl.decide.core "
              "[--dry-run] [--check])", file=sys.stderr)
        return 2
    try:
        build_dir()
    except UsageError as e:
        print(f"rxl: {e}", file=sys.stderr)
        return e.exit_code
    if "--dry-run" in args:
        lines = check_argvs(build_dir() / "check") if "--check" in args \
            else [build_argv(library_path())]
        for line in lines:
            print(shlex.join(line))
        return 0
    if "--check" in args:
        try:
            check()
        except (CoreError, OSError) as e:
            print(f"rxl: {reason(e)}", file=sys.stderr)
            return 1
        return 0
    try:
        print(build())
    except CoreError as e:
        print(f"rxl: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
