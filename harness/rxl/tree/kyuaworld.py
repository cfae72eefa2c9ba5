"""kyua for the SSH guest: the sshd userland (:mod:`rxl.tree.sshworld`) plus kyua.

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
public domain) into the FreeBSD work tree at build time, never into this
repository; lib/libsqlite3's own Makefile then builds it unchanged. The tarball
comes from the npm registry over plain HTTPS (Python's urllib: no npm needed):
the version's metadata (``GET {registry}/{name}/{version}``) gives ``dist.tarball``
and ``dist.integrity`` (Subresource Integrity, ``sha512-<base64>``); the tarball
must match that integrity and, for the pinned package, :data:`SQLITE_NPM_INTEGRITY`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from rxl import paths
from rxl.errors import HostError, reason

#: The npm package and version that supplies the amalgamation (its deps/sqlite3/):
#: better-sqlite3 12.9.0 ships SQLite 3.53.0 (docs/results/ssh.md).
SQLITE_NPM = "better-sqlite3@12.9.0"
#: ``dist.integrity`` of :data:`SQLITE_NPM` as the registry published it (read
#: 2026-12-01 from https://registry.npmjs.org/better-sqlite3/12.9.0; npm never
#: republishes a version, so a tarball with another digest is not that release).
SQLITE_NPM_INTEGRITY = ("sha512-wqUv4Gm3toFpHDQmaKD4QhZm3g1DjUBI0yzS4UBl6lElUmXFYdTQ"
                        "mmEDpAFa5o8FiFiymURypEnfVHzILKaxqQ==")
#: The npm registry's base URL.
NPM_REGISTRY = "https://registry.npmjs.org"
#: Seconds one HTTPS request may take.
HTTP_TIMEOUT = 120.0
#: Seconds ``rxl doctor`` waits for the registry.
DOCTOR_TIMEOUT = 10.0
#: Members of the npm tarball -> the work tree's files.
AMALGAMATION = {"package/deps/sqlite3/sqlite3.c": "contrib/sqlite3/sqlite3.c",
                "package/deps/sqlite3/sqlite3.h": "contrib/sqlite3/sqlite3.h"}
#: kyua's libraries, and jail(8)'s ``LIBADD= jail kvm util`` (usr.sbin/jail/Makefile;
#: libkvm needs libelf, Makefile.inc1 ``lib/libkvm__L: lib/libelf__L``).
KYUA_PREBUILD_LIBS: Tuple[str, ...] = ("lib/libc++", "lib/liblua", "lib/libsqlite3",
                                       "lib/libelf", "lib/libkvm")
KYUA_GENERIC_LIBS: Tuple[str, ...] = ("lib/liblutok",)
#: Guest path -> objdir path (relative to OBJTOP). A case whose metadata says
#: ``execenv = jail`` (every so_reuseport_lb_cpu_test case) is run by kyua through
#: ``/usr/sbin/jail`` (contrib/kyua/os/freebsd/utils/jail.cpp): without it each
#: such case is "broken: Failed to execute /usr/sbin/jail" (2026-12-03 guest run).
KYUA_PROGRAMS: Dict[str, str] = {"/usr/bin/kyua": "usr.bin/kyua/kyua",
                                 "/usr/sbin/jail": "usr.sbin/jail/jail"}
#: usr.bin/kyua/Makefile STORE: the schema and its migrations.
STORE_FILES = ("schema_v3.sql", "migrate_v1_v2.sql", "migrate_v2_v3.sql")
#: SRI algorithm names -> hashlib names (the ones npm writes; sha1 is only ``dist.shasum``).
_SRI_ALGOS = {"sha512": "sha512", "sha384": "sha384", "sha256": "sha256"}


def default_cache() -> str:
    """``$RXL_WORK/guest/up/kyua-deps``: where the npm tarball is kept."""
    return str(paths.work_root() / "guest" / "up" / "kyua-deps")


class KyuaError(HostError):
    """The amalgamation cannot be had; the message is one line."""


def sqlite_version(header_text: str) -> Optional[str]:
    """``SQLITE_VERSION`` of a sqlite3.h (or of the amalgamation, which embeds it)."""
    m = re.search(r'#define SQLITE_VERSION\s+"([0-9.]+)"', header_text)
    return m.group(1) if m else None


def split_package(package: str) -> Tuple[str, str]:
    """``NAME@VERSION`` -> (NAME, VERSION); a scoped ``@scope/name@1.2.3`` too. Raises
    KyuaError without an exact version (a range would not name one tarball)."""
    name, sep, version = package.rpartition("@")
    if not sep or not name or not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version):
        raise KyuaError(f"{package!r}: not NAME@X.Y.Z (an exact npm version)")
    return name, version


def metadata_url(package: str, registry: str = NPM_REGISTRY) -> str:
    """The registry's metadata URL of one version (``{registry}/{name}/{version}``)."""
    name, version = split_package(package)
    return f"{registry}/{name}/{version}"


def tarball_name(package: str) -> str:
    """The file name npm gives the tarball: ``{name}-{version}.tgz`` (scope dropped)."""
    name, version = split_package(package)
    return f"{name.rsplit('/', 1)[-1]}-{version}.tgz"


def integrity_of(data: bytes, algo: str = "sha512") -> str:
    """The Subresource Integrity string of ``data`` (``sha512-<base64 digest>``)."""
    return f"{algo}-" + base64.b64encode(hashlib.new(_SRI_ALGOS[algo], data).digest()).decode()


def integrity_matches(data: bytes, integrity: str) -> bool:
    """True when ``data`` matches one of the space-separated SRI hashes of
    ``integrity`` whose algorithm is known (sha512, sha384, sha256); False when none
    matches or none is of a known algorithm."""
    for item in integrity.split():
        algo = item.split("-", 1)[0]
        if algo in _SRI_ALGOS and integrity_of(data, algo) == item:
            return True
    return False


def _cached(package: str, cache: str) -> Optional[Path]:
    """The tarball of ``package`` in ``cache`` when it is the pinned release
    (:data:`SQLITE_NPM` matching :data:`SQLITE_NPM_INTEGRITY`), else None."""
    dest = Path(cache) / tarball_name(package)
    if package == SQLITE_NPM and dest.is_file() \
            and integrity_matches(dest.read_bytes(), SQLITE_NPM_INTEGRITY):
        return dest
    return None


def _get(url: str, urlopen: Callable, timeout: float = HTTP_TIMEOUT) -> bytes:
    try:
        with urlopen(url, timeout=timeout) as r:
            return r.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise KyuaError(f"GET {url} failed: {getattr(exc, 'reason', exc)}") from None


def fetch_tarball(package: str, cache: str, *, registry: str = NPM_REGISTRY,
                  urlopen: Callable = urllib.request.urlopen,
                  echo: Callable[[str], None] = print) -> Path:
    """The npm tarball of ``package`` (``NAME@X.Y.Z``) in ``cache``, checked.

    A tarball already in ``cache`` that matches the pinned integrity
    (:data:`SQLITE_NPM_INTEGRITY`, for :data:`SQLITE_NPM`) is used without the
    network. Otherwise the version's metadata gives ``dist.tarball`` and
    ``dist.integrity``; for the pinned package that integrity must be the pinned
    one; the downloaded bytes must match it before they are written. Raises
    KyuaError (one line) on a failed request, metadata without them, or a digest
    that does not match."""
    pinned = SQLITE_NPM_INTEGRITY if package == SQLITE_NPM else None
    dest = Path(cache) / tarball_name(package)
    if _cached(package, cache):
        echo(f"kyua: {dest} (integrity {SQLITE_NPM_INTEGRITY[:19]}... as pinned)")
        return dest
    url = metadata_url(package, registry)
    try:
        dist = json.loads(_get(url, urlopen))["dist"]
        tarball, integrity = dist["tarball"], dist["integrity"]
    except (ValueError, KeyError, TypeError):
        raise KyuaError(f"{url}: no dist.tarball and dist.integrity in the metadata") from None
    if pinned and integrity != pinned:
        raise KyuaError(f"{url}: dist.integrity {integrity[:19]}... is not the pinned "
                        f"{pinned[:19]}... (SQLITE_NPM_INTEGRITY)")
    echo(f"kyua: GET {tarball}")
    data = _get(tarball, urlopen)
    if not integrity_matches(data, integrity):
        raise KyuaError(f"{tarball}: {len(data)} bytes do not match dist.integrity "
                        f"{integrity[:19]}...")
    Path(cache).mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(dest)
    echo(f"kyua: {dest}: {len(data)} bytes, integrity {integrity[:19]}... matches")
    return dest


def fetch_amalgamation(src: str, cache: str, *, package: str = SQLITE_NPM,
                       registry: str = NPM_REGISTRY,
                       urlopen: Callable = urllib.request.urlopen,
                       echo: Callable[[str], None] = print) -> str:
    """Put sqlite3.c and sqlite3.h of ``package`` into ``src``/contrib/sqlite3 (the
    tarball is kept in ``cache``, :func:`fetch_tarball`). Returns the SQLite version.
    Nothing is fetched when the tree has a sqlite3.c already (its sqlite3.h must be
    of the same release). A tree whose sqlite3.c is this package's own while its
    sqlite3.h is another release (a ``git checkout -f`` of the base, as a series
    re-apply does, restores the tree's header but leaves the untracked .c) gets the
    package's header back. Raises KyuaError when the fetch fails, a file is missing
    from the tarball, or the two files are of different releases and the .c is not
    the package's."""
    tree = Path(src)
    have = tree / "contrib/sqlite3/sqlite3.c"
    if have.is_file():
        hdr = tree / "contrib/sqlite3/sqlite3.h"
        c = sqlite_version(have.read_text(errors="replace")[:200000])
        h = sqlite_version(hdr.read_text(errors="replace")) if hdr.is_file() else None
        if c is not None and c == h:
            echo(f"kyua: {have}: SQLite {c} (there already)")
            return c
        if not _ours(have, Path(cache) / tarball_name(package)):
            raise KyuaError(f"{have} (SQLite {c}) and sqlite3.h (SQLite {h}) are not one "
                            "release: rm the .c and git checkout the .h, then again")
        echo(f"kyua: {hdr}: SQLite {h}, but sqlite3.c is {package}'s SQLite {c}: "
             "its sqlite3.h put back")
    tgz = fetch_tarball(package, cache, registry=registry, urlopen=urlopen, echo=echo)
    texts = _amalgamation(tgz)
    for dest, data in texts.items():
        (tree / dest).write_bytes(data)
    version = sqlite_version(texts[AMALGAMATION["package/deps/sqlite3/sqlite3.h"]].decode(
        errors="replace"))
    echo(f"kyua: SQLite {version} from {package} -> {tree}/contrib/sqlite3 "
         "(undo: git checkout contrib/sqlite3/sqlite3.h; rm contrib/sqlite3/sqlite3.c)")
    return version


def _ours(c_file: Path, tgz: Path) -> bool:
    """Whether ``c_file`` is byte for byte the sqlite3.c of tarball ``tgz`` (one in the
    cache, not fetched)."""
    try:
        return tgz.is_file() and _amalgamation(str(tgz))[AMALGAMATION[
            "package/deps/sqlite3/sqlite3.c"]] == c_file.read_bytes()
    except (KyuaError, OSError):
        return False


def _amalgamation(tgz: str) -> Dict[str, bytes]:
    """Tree path -> bytes of :data:`AMALGAMATION` in tarball ``tgz``. Raises KyuaError
    when a file is missing or the two are not one release."""
    try:
        with tarfile.open(tgz) as tf:
            texts = {dest: tf.extractfile(member).read()
                     for member, dest in AMALGAMATION.items()}
    except (KeyError, AttributeError, OSError, tarfile.TarError) as exc:
        raise KyuaError(f"{tgz}: no deps/sqlite3/sqlite3.c and sqlite3.h ({reason(exc)})") from None
    versions = {sqlite_version(t.decode(errors="replace")[:200000]) for t in texts.values()}
    if len(versions) != 1 or None in versions:
        raise KyuaError(f"{tgz}: sqlite3.c and sqlite3.h are not one release ({versions})")
    return texts


def registry_problem(cache: Optional[str] = None, *, package: str = SQLITE_NPM,
                     registry: str = NPM_REGISTRY,
                     urlopen: Callable = urllib.request.urlopen) -> Optional[str]:
    """For ``rxl doctor``: None when the amalgamation can be had (the pinned tarball
    is in ``cache``, or the registry answers for ``package``), else a one-line
    reason saying how to provide it. ``cache``: default :func:`default_cache`."""
    cache = cache or default_cache()
    if _cached(package, cache):
        return None
    try:
        _get(metadata_url(package, registry), urlopen, timeout=DOCTOR_TIMEOUT)
    except KyuaError as exc:
        return f"{exc}; or put {tarball_name(package)} into {cache}"
    return None


def guest_files(src: str) -> Dict[str, str]:
    """Root-relative path -> tree file: kyua's store schema and migrations."""
    return {f"usr/share/kyua/store/{n}": str(Path(src) / "contrib/kyua/store" / n)
            for n in STORE_FILES}
