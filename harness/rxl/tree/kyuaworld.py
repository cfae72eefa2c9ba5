"""kyua for the SSH guest: the sshd userland (:mod:`rxl.tree.sshworld`) plus kyua.

NOT YET BUILT (docs/results/ssh.md): the amalgamation fetch ran for real
(better-sqlite3 12.9.0 -> SQLite 3.53.0 into a work tree); the world build
with kyua and a kyua run in the guest have not run.

kyua (usr.bin/kyua, ``LIBADD= lutok sqlite3``, C++) needs libc++ (Makefile.inc1
``_prebuild_libs``; libcxxrt and libgcc_s are startup libraries, built anyway),
lutok (lib/liblutok, ``LIBADD= lua``), lua (lib/liblua) and sqlite3
(lib/libsqlite3). At run time it reads its store schema from
``/usr/share/kyua/store`` (usr.bin/kyua/Makefile ``STORE``), staged from
contrib/kyua/store (:func:`guest_files`).

The FreeBSD snapshot lacks ``contrib/sqlite3/sqlite3.c`` (the 4 MiB+
amalgamation; ``sqlite3.h`` is there, SQLite 3.44.0). :func:`fetch_amalgamation`
takes ``sqlite3.c`` and ``sqlite3.h`` of one SQLite release from the npm package
better-sqlite3 (:data:`SQLITE_NPM`; it ships them as ``deps/sqlite3/``; SQLite is
public domain) with ``npm pack`` at build time into the FreeBSD work tree, never
into this repository; lib/libsqlite3's own Makefile then builds it unchanged.
"""

from __future__ import annotations

import re
import subprocess
import tarfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

#: The npm package and version that supplies the amalgamation (its deps/sqlite3/).
SQLITE_NPM = "better-sqlite3@12.9.0"
#: Members of the npm tarball -> the work tree's files.
AMALGAMATION = {"package/deps/sqlite3/sqlite3.c": "contrib/sqlite3/sqlite3.c",
                "package/deps/sqlite3/sqlite3.h": "contrib/sqlite3/sqlite3.h"}
KYUA_PREBUILD_LIBS: Tuple[str, ...] = ("lib/libc++", "lib/liblua", "lib/libsqlite3")
KYUA_GENERIC_LIBS: Tuple[str, ...] = ("lib/liblutok",)
#: Guest path -> objdir path (relative to OBJTOP).
KYUA_PROGRAMS: Dict[str, str] = {"/usr/bin/kyua": "usr.bin/kyua/kyua"}
#: usr.bin/kyua/Makefile STORE: the schema and its migrations.
STORE_FILES = ("schema_v3.sql", "migrate_v1_v2.sql", "migrate_v2_v3.sql")


class KyuaError(RuntimeError):
    """The amalgamation cannot be had; the message is one line."""


def sqlite_version(header_text: str) -> Optional[str]:
    """``SQLITE_VERSION`` of a sqlite3.h (or of the amalgamation, which embeds it)."""
    m = re.search(r'#define SQLITE_VERSION\s+"([0-9.]+)"', header_text)
    return m.group(1) if m else None


def npm_pack_argv(dest: str, package: str = SQLITE_NPM) -> List[str]:
    """``npm pack PACKAGE --pack-destination DEST``: the tarball, nothing installed."""
    return ["npm", "pack", package, "--pack-destination", dest, "--silent"]


def fetch_amalgamation(src: str, cache: str, *, package: str = SQLITE_NPM,
                       run: Callable = subprocess.run,
                       echo: Callable[[str], None] = print) -> str:
    """Put sqlite3.c and sqlite3.h of ``package`` into ``src``/contrib/sqlite3 (the
    tarball is kept in ``cache``). Returns the SQLite version. Nothing is fetched
    when the tree has a sqlite3.c already. Raises KyuaError when npm fails, a file
    is missing from the tarball, or the two files are of different releases."""
    tree = Path(src)
    have = tree / "contrib/sqlite3/sqlite3.c"
    if have.is_file():
        return sqlite_version(have.read_text(errors="replace")[:200000]) or "unknown"
    Path(cache).mkdir(parents=True, exist_ok=True)
    argv = npm_pack_argv(cache, package)
    echo(f"kyua: {' '.join(argv)}")
    p = run(argv, capture_output=True, text=True)
    if p.returncode:
        raise KyuaError(f"npm pack {package} failed: {(p.stderr or p.stdout).strip()[-200:]}")
    tgz = Path(cache) / p.stdout.strip().splitlines()[-1]
    try:
        with tarfile.open(tgz) as tf:
            texts = {dest: tf.extractfile(member).read()
                     for member, dest in AMALGAMATION.items()}
    except (KeyError, AttributeError, OSError, tarfile.TarError) as exc:
        raise KyuaError(f"{tgz}: no deps/sqlite3/sqlite3.c and sqlite3.h ({exc})") from None
    versions = {sqlite_version(t.decode(errors="replace")[:200000]) for t in texts.values()}
    if len(versions) != 1 or None in versions:
        raise KyuaError(f"{tgz}: sqlite3.c and sqlite3.h are not one release ({versions})")
    for dest, data in texts.items():
        (tree / dest).write_bytes(data)
    version = versions.pop()
    echo(f"kyua: SQLite {version} from {package} -> {tree}/contrib/sqlite3 "
         "(undo: git checkout contrib/sqlite3/sqlite3.h; rm contrib/sqlite3/sqlite3.c)")
    return version


def guest_files(src: str) -> Dict[str, str]:
    """Root-relative path -> tree file: kyua's store schema and migrations."""
    return {f"usr/share/kyua/store/{n}": str(Path(src) / "contrib/kyua/store" / n)
            for n in STORE_FILES}
