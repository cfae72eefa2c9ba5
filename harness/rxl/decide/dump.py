"""``kern.sched.topology_spec`` dumps as people paste them.

What ``sysctl kern.sched.topology_spec`` prints (sys/kern/sched_ule.c,
``sysctl_kern_sched_topology_spec()``): ``<groups>``, one root ``<group
level="1" cache-level="N">`` with a ``<cpu count="K" mask="...">`` list,
optional ``<flags>`` and nested ``<children>``, then ``</groups>``.  Pasted
into a file it often carries more or less than that, and this reader takes
it as it comes:

* around the dump, only what a terminal paste carries: before the first
  ``<groups>`` / ``<group>`` tag, the ``kern.sched.topology_spec:`` name
  ``sysctl`` prints without ``-n`` and lines that are a shell prompt
  (``$ sysctl kern.sched.topology_spec``) or a ``sysctl`` command; after
  the dump, prompt lines (:data:`_PROMPT`).  Any other text there is
  refused naming its line, since a parser accounts for every line;
* a missing final ``</groups>``; tabs, spaces or no indentation at all;
* ``-`` for stdin and pipes (``--topology <(ssh host sysctl -n
  kern.sched.topology_spec)``), not only regular files; a named FIFO is
  refused before it is opened (with no writer its open blocks for ever:
  rxl.cli.options.stream_reason).

Everything else is refused with :class:`TopologyError` and a one-line
message that names the line of the damage in the input as given: a dump
cut off (inside a tag, or with groups left open), two dumps pasted into
one file, a stray token in a CPU list, a second ``<cpu>`` in one group, a
non-numeric attribute, numbers too long to be CPU ids, nesting deeper
than any ``smp_topo()`` tree, and the kernel's own answer when it has no
topology (a root group with no CPUs).  The parser is expat, driven event
by event with an explicit stack, so deep nesting costs no Python
recursion.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from typing import List, Optional, Tuple
from xml.parsers import expat

from rxl.cli.options import BOM, link_reason, stream_reason
from rxl.decide import cpugroup
from rxl.decide.cpugroup import CPU_MAXSIZE, MAX_DEPTH, Group, Topology, TopologyError
from rxl.errors import counted, os_reason

#: Flag names the kernel prints (sys/kern/sched_ule.c) and their CG_FLAG_*
#: bits (sys/sys/smp.h).  THREAD is printed for HTT or SMT groups; on its
#: own it stands for SMT.
FLAG_BITS = dict(cpugroup.FLAG_NAMES, THREAD=0)

#: Largest dump read, in bytes: a 1024-CPU machine's dump is under 1 MiB.
MAX_BYTES = 16 << 20
#: Longest number accepted in a dump: CPU ids and counts stay below
#: CPU_MAXSIZE (4 digits), cache levels below 4.
MAX_DIGITS = 6
#: Bits of one word of a ``<cpu mask=...>``: the kernel prints a cpuset as
#: its ``long`` words (sys/sys/_bitset.h, __bitset_words), 64 bits on amd64.
MASK_WORD_BITS = 64

_START = re.compile(r"<groups?(?=[\s/>])")
#: A shell prompt line as a paste carries it: an optional ``user@host:dir``
#: word, then ``$``, ``#``, ``%`` or ``>``, then what was typed
#: (``$ sysctl kern.sched.topology_spec``, ``root@guest:~ # ``).
_PROMPT = re.compile(r"\s*(\S*\s?)?[$#%>](\s.*)?")
#: A ``sysctl`` command line typed without a prompt.
_SYSCTL = re.compile(r"\s*sysctl(\s.*)?")
#: The name ``sysctl`` prints before the value without ``-n``.
_NAME = "kern.sched.topology_spec:"


def _stray(text: str, first_line: int, before: bool) -> Optional[int]:
    """The 1-based number of the first line of ``text`` (whose first line
    is input line ``first_line``) that is neither blank nor what a paste
    carries around a dump (module docstring), or None if there is none.
    ``before`` is True for the text ahead of the dump, whose last line may
    end in the ``kern.sched.topology_spec:`` name."""
    lines = text.split("\n")
    for i, ln in enumerate(lines):
        if before and i == len(lines) - 1 and ln.rstrip().endswith(_NAME):
            ln = ln.rstrip()[:-len(_NAME)]
        if not ln.strip() or _PROMPT.fullmatch(ln) or (before and _SYSCTL.fullmatch(ln)):
            continue
        return first_line + i
    return None


def read_source(spec: str) -> Tuple[str, str]:
    """The text of ``spec``: ``-`` (stdin), or a path to a regular file, the
    pipe of ``<(...)`` or a character device.  Returns ``(text, name)``.

    Raises TopologyError for a missing or unreadable path, a directory, a
    socket or a named FIFO (never opened), a file that is not UTF-8 text or
    is larger than :data:`MAX_BYTES`.
    """
    if spec == "-":
        name = "<stdin>"
        buf = getattr(sys.stdin, "buffer", None)
        if buf is None:  # a text stream given in place of stdin (no bytes to check)
            data = sys.stdin.read(MAX_BYTES + 1)
        else:  # decoded as strictly as a file: bytes that are not UTF-8 are refused
            raw = buf.read(MAX_BYTES + 1)
            if len(raw) > MAX_BYTES:
                raise TopologyError(f"{name}: larger than {MAX_BYTES >> 20} MiB; "
                                    "not a topology dump")
            try:
                data = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise TopologyError(f"{name}: not text (not UTF-8)") from None
    else:
        try:
            st = os.stat(spec)
        except OSError as e:
            raise TopologyError(f"{spec}: {link_reason(spec) or os_reason(e)} (a topology "
                                "file holds sysctl -n "
                                "kern.sched.topology_spec output)")
        if stat.S_ISDIR(st.st_mode):
            raise TopologyError(f"{spec}: is a directory, not a topology "
                                "dump")
        why = stream_reason(st, "topology dump")  # a socket; a named FIFO blocks open(2)
        if why:
            raise TopologyError(f"{spec}: {why}")
        try:
            with open(spec, encoding="utf-8") as f:
                data = f.read(MAX_BYTES + 1)
        except OSError as e:
            raise TopologyError(f"cannot read {spec}: {e.strerror}")
        except UnicodeDecodeError:
            raise TopologyError(f"{spec}: not a text file (not UTF-8)")
        name = spec
    if len(data) > MAX_BYTES:
        raise TopologyError(f"{name}: larger than {MAX_BYTES >> 20} MiB; "
                            "not a topology dump")
    return data.removeprefix(BOM), name  # an editor's byte-order mark is no text before it


def is_source(spec: str) -> bool:
    """Does ``spec`` name stdin or a path that is there (a file, FIFO, device,
    or a symbolic link, even one that does not resolve: a loop or a dangling
    link is then said by :func:`read_source` as the system says it)?"""
    return spec == "-" or os.path.lexists(spec)


class _Frame:
    """A ``<group>`` being read: where it opened and what it holds."""

    __slots__ = ("line", "level", "cpus", "flags", "children")

    def __init__(self, line: int, level: int) -> None:
        self.line = line
        self.level = level
        self.cpus: Optional[Tuple[int, ...]] = None
        self.flags = 0
        self.children: List[Group] = []


class _Reader:
    """expat handlers building :class:`Group` trees with line numbers."""

    def __init__(self, name: str, line0: int) -> None:
        self.name = name
        self.line0 = line0            # lines of the input before the dump
        self.stack: List[_Frame] = []
        self.groups_open = False      # inside <groups>
        self.root: Optional[Group] = None
        self.cpu_text: Optional[List[str]] = None
        self.cpu_count: Optional[int] = None
        self.cpu_mask: Optional[int] = None
        self.cpu_line = 0
        # Text inside <groups> but outside every <group>: (line, text).
        self.loose: List[Tuple[int, str]] = []
        self.parser = expat.ParserCreate()
        self.parser.StartElementHandler = self.start
        self.parser.EndElementHandler = self.end
        self.parser.CharacterDataHandler = self.chars

    def line(self) -> int:
        return self.line0 + self.parser.CurrentLineNumber

    def fail(self, msg: str, line: Optional[int] = None) -> TopologyError:
        return TopologyError(f"{self.name}: line "
                             f"{self.line() if line is None else line}: "
                             f"{msg}")

    #: What a negative value of a field is, said instead of "not a number".
    NEGATIVE = {"CPU": f"is no CPU id (0 to {CPU_MAXSIZE - 1})",
                "cache-level": "is not one of 0-3 (CG_SHARE_NONE to CG_SHARE_L3)"}

    def number(self, what: str, text: str) -> int:
        t = text.strip()
        if not t.isdigit() or not t.isascii():
            if t[:1] == "-" and t[1:].isdigit() and t[1:].isascii():
                raise self.fail(f"{what} {_short(t)!r} " +
                                self.NEGATIVE.get(what, "is negative (0 or more)"))
            raise self.fail(f"{what} {_short(t)!r} is not a number")
        if len(t) > MAX_DIGITS:
            raise self.fail(f"{what} {_short(t)} is too large "
                            f"({len(t)} digits)")
        return int(t)

    def mask(self, text: str) -> int:
        """A ``<cpu mask=...>`` as the CPU bits it sets: the kernel's
        cpusetobj_strprint() words, 64 bits each, lowest first
        (``ff,0,...``), or one hex number (rxl's own dumps)."""
        words = text.strip().split(",")
        if not all(re.fullmatch(r"[0-9a-fA-F]{1,%d}" % (CPU_MAXSIZE // 4), w) for w in words) \
                or len(words) > CPU_MAXSIZE // MASK_WORD_BITS:
            raise self.fail(f"mask {_short(text)!r} is not a CPU mask (hex words, "
                            "lowest first)")
        if len(words) == 1:
            return int(words[0], 16)
        return sum(int(w, 16) << (MASK_WORD_BITS * i) for i, w in enumerate(words))

    def start(self, tag: str, attrs: dict) -> None:
        if tag == "groups":
            if self.groups_open or self.stack or self.root is not None:
                raise self.fail("a second <groups> starts here: the input "
                                "holds two pasted dumps; keep one")
            self.groups_open = True
        elif tag == "group":
            if self.root is not None:
                raise self.fail("a second root <group> starts here: the "
                                "input holds two pasted dumps; keep one")
            if len(self.stack) >= MAX_DEPTH + 1:
                raise self.fail(f"cpu_group tree deeper than {MAX_DEPTH} "
                                "levels")
            self.number("level", attrs.get("level", "0"))
            level = self.number("cache-level", attrs.get("cache-level", "0"))
            self.stack.append(_Frame(self.line(), level))
        elif tag == "cpu":
            if not self.stack:
                raise self.fail("<cpu> outside a <group>")
            if self.stack[-1].cpus is not None or self.cpu_text is not None:
                raise self.fail("a second <cpu> in the <group> of line "
                                f"{self.stack[-1].line}; a group lists its CPUs once")
            self.cpu_text = []
            self.cpu_line = self.line()
            self.cpu_count = (self.number("count", attrs["count"])
                              if "count" in attrs else None)
            self.cpu_mask = self.mask(attrs["mask"]) if "mask" in attrs else None
        elif tag == "flag":
            if not self.stack:
                raise self.fail("<flag> outside a <group>")
            name = attrs.get("name", "")
            if name not in FLAG_BITS:
                raise self.fail(f"unknown cpu_group flag {_short(name)!r}")
            self.stack[-1].flags |= FLAG_BITS[name] or (
                cpugroup.CG_FLAG_SMT
                if not self.stack[-1].flags & cpugroup.CG_FLAG_THREAD else 0)
        elif tag not in ("flags", "children"):
            raise self.fail(f"unexpected element <{_short(tag)}>")

    def chars(self, data: str) -> None:
        if self.cpu_text is not None:
            self.cpu_text.append(data)
        elif not self.stack and data.strip():
            self.loose.append((self.line(), data))

    def check_loose(self) -> None:
        """Refuse text inside ``<groups>`` outside every ``<group>``,
        naming its line; with the final ``</groups>`` missing, prompt
        lines after the root group are what a paste carries."""
        for line, data in self.loose:
            tail = self.groups_open and self.root is not None
            bad = _stray(data, line, before=False) if tail else (
                line + next(i for i, ln in enumerate(data.split("\n")) if ln.strip()))
            if bad is not None:
                raise self.fail("text outside every <group> of the dump; "
                                "remove it", bad)

    def end(self, tag: str) -> None:
        if tag == "cpu":
            self.end_cpu()
        elif tag == "group":
            self.end_group()
        elif tag == "groups":
            self.groups_open = False

    def end_cpu(self) -> None:
        text = "".join(self.cpu_text or [])
        self.cpu_text = None
        cpus = []
        for tok in re.split(r"[\s,]+", text.strip()) if text.strip() else []:
            cpu = self.number("CPU", tok)
            if cpu >= CPU_MAXSIZE:
                raise self.fail(f"CPU id {cpu} is beyond CPU_MAXSIZE "
                                f"({CPU_MAXSIZE})")
            cpus.append(cpu)
        if self.cpu_count is not None and self.cpu_count != len(cpus):
            raise self.fail(f"<cpu count=\"{self.cpu_count}\"> lists "
                            f"{counted(len(cpus), 'CPU')}", self.cpu_line)
        if len(set(cpus)) != len(cpus):
            raise self.fail("a CPU is listed twice", self.cpu_line)
        if self.cpu_mask is not None and self.cpu_mask != sum(1 << c for c in cpus):
            raise self.fail(f"<cpu mask=...> holds CPUs {_mask_cpus(self.cpu_mask)}, its "
                            f"list {cpugroup.cpu_ranges(sorted(cpus)) or 'none'}",
                            self.cpu_line)
        self.stack[-1].cpus = tuple(sorted(cpus))

    def end_group(self) -> None:
        f = self.stack.pop()
        if f.cpus is None:
            raise self.fail("<group> without <cpu>", f.line)
        if not f.cpus:
            if not self.stack:
                raise TopologyError(
                    f"{self.name}: the kernel reported no CPU topology (its "
                    "root group lists no CPUs); use a built-in or LxCxT "
                    "topology instead")
            raise self.fail("a <group> with no CPUs", f.line)
        if not 0 <= f.level <= cpugroup.CG_SHARE_L3:
            raise self.fail(f"cache-level {f.level} is not one of 0-3 "
                            "(CG_SHARE_NONE to CG_SHARE_L3)", f.line)
        if f.children:
            union = sorted(c for g in f.children for c in g.cpus)
            if union != list(f.cpus):
                raise self.fail("the children of this <group> do not "
                                "partition its CPUs", f.line)
        g = Group(f.cpus, f.level, f.flags, tuple(f.children))
        if self.stack:
            self.stack[-1].children.append(g)
        else:
            self.root = g


def _mask_cpus(mask: int) -> str:
    """The CPUs a mask sets, as a range list (``none`` for 0)."""
    return cpugroup.cpu_ranges([c for c in range(mask.bit_length()) if mask >> c & 1]) or "none"


def _short(text: str, n: int = 24) -> str:
    return text if len(text) <= n else text[:n] + "..."


def parse_spec(text: str, name: str = "topology_spec") -> Topology:
    """Parse a ``kern.sched.topology_spec`` dump as pasted (module
    docstring).  Raises TopologyError naming the line of the damage."""
    m = _START.search(text)
    if m is None:
        raise TopologyError(f"{name}: no <groups> or <group> element found "
                            "(expected sysctl -n kern.sched.topology_spec "
                            "output)")
    line0 = text.count("\n", 0, m.start())
    bad = _stray(text[:m.start()], 1, before=True)
    if bad is not None:
        raise TopologyError(f"{name}: line {bad}: text before the dump that is "
                            "no shell prompt or sysctl line; remove it")
    r = _Reader(name, line0)
    body = text[m.start():]
    try:
        r.parser.Parse(body, True)
    except expat.ExpatError as e:
        _explain(r, body, e)
    except RecursionError:  # pragma: no cover - the reader has no recursion
        raise TopologyError(f"{name}: nesting too deep")
    r.check_loose()
    if r.root is None:  # pragma: no cover - expat reports this first
        raise TopologyError(f"{name}: no complete <group> found")
    try:
        return Topology(name, r.root)
    except TopologyError as e:
        raise TopologyError(f"{name}: {e}")


def _explain(r: _Reader, body: str, e: expat.ExpatError) -> None:
    """Accept what a paste may lack or carry, or raise a TopologyError
    that says what is wrong and where."""
    line = r.line0 + e.lineno
    codes = expat.errors.codes
    if r.root is not None and not r.stack and not r.groups_open:
        # Text after the dump: a prompt, or a second dump.
        err = _offset(body, e.lineno, e.offset)
        # expat may point inside the text; it starts where the dump ends
        rest = max((body.rfind(t, 0, err + 1) + len(t)
                    for t in ("</groups>", "</group>") if body.rfind(t, 0, err + 1) >= 0),
                   default=err)
        nxt = _START.search(body, rest)
        if nxt is None:
            first = r.line0 + body.count("\n", 0, rest) + 1
            bad = _stray(body[rest:], first, before=False)
            if bad is None:
                return                      # a prompt after the dump
            raise TopologyError(f"{r.name}: line {bad}: text after the dump "
                                "that is no shell prompt; remove it")
        raise TopologyError(
            f"{r.name}: line {r.line0 + body.count(chr(10), 0, nxt.start()) + 1}"
            ": a second dump starts here: the input holds two pasted "
            "dumps; keep one")
    at_end = e.code in (codes[expat.errors.XML_ERROR_NO_ELEMENTS],
                        codes[expat.errors.XML_ERROR_UNCLOSED_TOKEN],
                        codes[expat.errors.XML_ERROR_PARTIAL_CHAR])
    if at_end and r.root is not None:
        return                              # only </groups> is missing
    if e.code == codes[expat.errors.XML_ERROR_UNCLOSED_TOKEN]:
        raise TopologyError(
            f"{r.name}: line {line}, column {e.offset + 1}: the dump is cut "
            "off inside this tag")
    if at_end and e.offset == 0 and line > r.line0 + 1:
        line -= 1                           # the last line that has text
    if at_end and r.stack:
        raise TopologyError(
            f"{r.name}: line {line}: the dump ends before the <group> of "
            f"line {r.stack[-1].line} is closed (cut off?)")
    if at_end:
        raise TopologyError(f"{r.name}: line {line}: the dump ends before "
                            "its first <group> is complete (cut off?)")
    if e.code == codes[expat.errors.XML_ERROR_TAG_MISMATCH] and r.stack:
        raise TopologyError(
            f"{r.name}: line {line}, column {e.offset + 1}: a closing tag "
            f"that does not match the <group> of line {r.stack[-1].line} "
            "(lines lost or pasted twice?)")
    raise TopologyError(f"{r.name}: line {line}, column {e.offset + 1}: "
                        f"not well-formed topology XML "
                        f"({expat.errors.messages[e.code]})")


def _offset(text: str, lineno: int, col: int) -> int:
    """Index in ``text`` of 1-based line ``lineno``, 0-based ``col``."""
    pos = 0
    for _ in range(lineno - 1):
        pos = text.index("\n", pos) + 1
    return pos + col
