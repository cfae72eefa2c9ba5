"""The test kernel's configuration: its text and where it goes in a tree.

``RXL`` = GENERIC + INVARIANTS, INVARIANT_SUPPORT, WITNESS (a -STABLE
GENERIC carries none of them) + ``device epair`` (the ATF cases that count
handshakes, count_unhashed and the learning cases, connect over an
epair(4), since nothing is learned from loopback; GENERIC does not have it
and a NO_MODULES build cannot load it), written into ``sys/amd64/conf/RXL``
of the tree before each build (never committed).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, Union

from rxl.errors import BadOption, show

PathLike = Union[str, "os.PathLike[str]"]
#: The test kernel configuration's name (rxl.tree.build.DEFAULT_KERNCONF).
DEFAULT_KERNCONF = "RXL"
#: amd64 only: the guest and the host are both amd64.
DEFAULT_TARGET = "amd64"


def kernconf_text(ident: str = DEFAULT_KERNCONF, base: str = "GENERIC",
                  options: Iterable[str] = ("INVARIANTS", "INVARIANT_SUPPORT",
                                            "WITNESS"),
                  devices: Iterable[str] = ("epair",)) -> str:
    """Return the text of the test kernel configuration.

    ``include <base>`` + ``ident <ident>`` + one ``options`` line each, then
    one ``device`` line each.
    GENERIC on a -STABLE branch (14.0-STABLE here) carries no INVARIANTS or
    WITNESS, unlike -CURRENT's, hence the explicit lines.  Raises
    ``ValueError`` for an ident that is not a plain config name.
    """
    if not re.fullmatch(r"[A-Z][A-Z0-9_-]*", ident):
        raise ValueError(f"kernconf_text: bad ident {ident!r}")
    lines = ["# Test kernel for the rxl series, written by `rxl build`.",
             "# Not part of the series; regenerated on every build.",
             f"include\t{base}", f"ident\t{ident}", ""]
    lines += [f"options \t{opt}" for opt in options]
    lines += [f"device \t{dev}" for dev in devices]
    return "\n".join(lines) + "\n"


def kernconf_path(src: PathLike, ident: str = DEFAULT_KERNCONF,
                  target: str = DEFAULT_TARGET) -> Path:
    """Where the test config goes: ``<src>/sys/<target>/conf/<ident>``."""
    return Path(src) / "sys" / target / "conf" / ident


def write_kernconf(src: PathLike, ident: str = DEFAULT_KERNCONF) -> Path:
    """Write the test config into the tree (not committed anywhere)."""
    path = kernconf_path(src, ident)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{path.parent}: not a FreeBSD tree "
                                "(no sys/amd64/conf)")
    text = kernconf_text(ident)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


#: A kernel config's name: a file name in ``sys/<target>/conf`` (GENERIC,
#: GENERIC-NODEBUG, MINIMAL): letters, digits, ``_``, ``-`` and ``.``, not
#: starting with ``.`` or ``-``; make's KERNCONF takes several names split by
#: blanks, rxl builds one.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def check_kernconf(src: PathLike, ident: str, option: str = "--kernconf") -> None:
    """Refuse a kernel config ``rxl build`` cannot build, before anything runs:
    a name that is not one config file's (a path, a blank, a leading ``.``), or
    a config other than :data:`DEFAULT_KERNCONF` (which the build writes) that
    the tree does not have. Raises :class:`rxl.errors.BadOption` naming
    ``option``."""
    if not _NAME.fullmatch(ident):
        raise BadOption(f"{show(ident)}: not a kernel config name (a file name in "
                        f"sys/{DEFAULT_TARGET}/conf, such as GENERIC)", option)
    if ident != DEFAULT_KERNCONF and not kernconf_path(src, ident).is_file():
        raise BadOption(f"{ident}: no such config in {kernconf_path(src, ident).parent}",
                        option)
