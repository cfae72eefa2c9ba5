"""The test kernel's configuration: its text and where it goes in a tree.

``RXL`` = GENERIC + INVARIANTS, INVARIANT_SUPPORT, WITNESS (a -STABLE
GENERIC carries none of them), written into ``sys/amd64/conf/RXL`` of the
tree before each build (never committed).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, Union

PathLike = Union[str, "os.PathLike[str]"]
#: The test kernel configuration's name (rxl.tree.build.DEFAULT_KERNCONF).
DEFAULT_KERNCONF = "RXL"
#: amd64 only: the guest and the host are both amd64.
DEFAULT_TARGET = "amd64"


def kernconf_text(ident: str = DEFAULT_KERNCONF, base: str = "GENERIC",
                  options: Iterable[str] = ("INVARIANTS", "INVARIANT_SUPPORT",
                                            "WITNESS")) -> str:
    """Return the text of the test kernel configuration.

    ``include <base>`` + ``ident <ident>`` + one ``options`` line each.
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
