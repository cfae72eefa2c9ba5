"""rxl.tree.kyuaworld: the SQLite amalgamation from an npm tarball, kyua's plan."""

import http.server
import io
import json
import tarfile
import threading

import pytest

from rxl.tree import kyuaworld as K
from rxl.tree import sshworld


def _tarball(path, c_version="3.50.4", h_version="3.50.4", members=None):
    files = members or {"package/deps/sqlite3/sqlite3.c":
                        f'/* amalgamation */\n#define SQLITE_VERSION        "{c_version}"\n',
                        "package/deps/sqlite3/sqlite3.h":
                        f'#define SQLITE_VERSION        "{h_version}"\n'}
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


class _Registry:
    """A real HTTP server on 127.0.0.1 that answers as the npm registry does:
    ``/<name>/<version>`` -> the version's metadata, ``/-/<file>`` -> the tarball."""

    def __init__(self, tarball: bytes, integrity=None, name="better-sqlite3",
                 version="12.8.0"):
        self.requests = []
        reg = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                reg.requests.append(self.path)
                if self.path == f"/{name}/{version}":
                    body = json.dumps({"name": name, "version": version, "dist": {
                        "tarball": f"{reg.url}/-/{name}-{version}.tgz",
                        "integrity": integrity or K.integrity_of(tarball)}}).encode()
                elif self.path == f"/-/{name}-{version}.tgz":
                    body = tarball
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def registry(tmp_path):
    made = []

    def make(**kw):
        path = tmp_path / f"pkg{len(made)}.tgz"
        _tarball(path, **{k: v for k, v in kw.items() if k not in ("integrity", "version")})
        reg = _Registry(path.read_bytes(), integrity=kw.get("integrity"),
                        version=kw.get("version", "12.8.0"))
        made.append(reg)
        return reg
    yield make
    for reg in made:
        reg.close()


#: Not the pinned K.SQLITE_NPM: checked against the registry's integrity alone.
PKG = "better-sqlite3@12.8.0"
#: A registry nobody answers at (port 1 on loopback: connection refused).
DEAD = "http://127.0.0.1:1"


def _fetch(src, cache, reg_url, package=PKG, lines=None):
    return K.fetch_amalgamation(str(src), str(cache), package=package, registry=reg_url,
                                echo=(lines.append if lines is not None else lambda s: None))


def test_fetch_puts_both_files_of_one_release(tmp_path, registry):
    src, cache = tmp_path / "src", tmp_path / "cache"
    (src / "contrib/sqlite3").mkdir(parents=True)
    (src / "contrib/sqlite3/sqlite3.h").write_text('#define SQLITE_VERSION "3.44.0"\n')
    reg = registry()
    lines = []
    assert _fetch(src, cache, reg.url, lines=lines) == "3.50.4"
    assert reg.requests == ["/better-sqlite3/12.8.0", "/-/better-sqlite3-12.8.0.tgz"]
    assert (cache / "better-sqlite3-12.8.0.tgz").is_file()
    assert "3.50.4" in (src / "contrib/sqlite3/sqlite3.h").read_text()
    assert "amalgamation" in (src / "contrib/sqlite3/sqlite3.c").read_text()
    assert any("undo" in ln for ln in lines) and any("matches" in ln for ln in lines)
    # present now: nothing fetched again, the version read from the tree
    assert _fetch(src, cache, DEAD) == "3.50.4"
    assert len(reg.requests) == 2


def test_a_tarball_that_does_not_match_its_integrity_is_refused(tmp_path, registry):
    src = tmp_path / "src"
    (src / "contrib/sqlite3").mkdir(parents=True)
    reg = registry(integrity=K.integrity_of(b"another tarball"))
    with pytest.raises(K.KyuaError, match="do not match dist.integrity sha512-"):
        _fetch(src, tmp_path / "c", reg.url)
    assert not (src / "contrib/sqlite3/sqlite3.c").exists()
    assert not (tmp_path / "c" / "better-sqlite3-12.8.0.tgz").exists()


def test_the_pinned_package_needs_the_pinned_integrity(tmp_path, registry):
    """For SQLITE_NPM the registry's own integrity must be the pinned one: a
    republished (or substituted) tarball is refused before it is downloaded."""
    reg = registry(version="12.9.0")
    with pytest.raises(K.KyuaError, match="is not the pinned sha512-wqUv4Gm3"):
        _fetch(tmp_path / "src", tmp_path / "c", reg.url, package=K.SQLITE_NPM)
    assert reg.requests == ["/better-sqlite3/12.9.0"]


def test_a_cached_pinned_tarball_needs_no_network(tmp_path, monkeypatch):
    src, cache = tmp_path / "src", tmp_path / "c"
    (src / "contrib/sqlite3").mkdir(parents=True)
    cache.mkdir()
    _tarball(cache / "better-sqlite3-12.9.0.tgz", c_version="3.53.0", h_version="3.53.0")
    monkeypatch.setattr(K, "SQLITE_NPM_INTEGRITY",
                        K.integrity_of((cache / "better-sqlite3-12.9.0.tgz").read_bytes()))
    assert _fetch(src, cache, DEAD, package=K.SQLITE_NPM) == "3.53.0"
    assert K.registry_problem(str(cache), registry=DEAD) is None
    # a cached file with another digest is fetched again (and the registry is down)
    (cache / "better-sqlite3-12.9.0.tgz").write_bytes(b"truncated")
    (src / "contrib/sqlite3/sqlite3.c").unlink()
    with pytest.raises(K.KyuaError, match=r"GET http://127.0.0.1:1/better-sqlite3/12.9.0 "
                                          r"failed: .*refused"):
        _fetch(src, cache, DEAD, package=K.SQLITE_NPM)


def test_fetch_refuses_mixed_releases_and_missing_members(tmp_path, registry):
    src = tmp_path / "src"
    (src / "contrib/sqlite3").mkdir(parents=True)
    with pytest.raises(K.KyuaError, match="not one release"):
        _fetch(src, tmp_path / "c1", registry(h_version="3.49.0").url)
    with pytest.raises(K.KyuaError, match="no deps/sqlite3"):
        _fetch(src, tmp_path / "c2", registry(members={"package/README.md": "x"}).url)
    assert not (src / "contrib/sqlite3/sqlite3.c").exists()  # nothing half-written


def test_a_tree_with_mismatched_files_is_refused(tmp_path):
    src = tmp_path / "src"
    (src / "contrib/sqlite3").mkdir(parents=True)
    (src / "contrib/sqlite3/sqlite3.c").write_text('#define SQLITE_VERSION "3.53.0"\n')
    (src / "contrib/sqlite3/sqlite3.h").write_text('#define SQLITE_VERSION "3.44.0"\n')
    with pytest.raises(K.KyuaError, match=r"SQLite 3.53.0\) and sqlite3.h \(SQLite 3.44.0"):
        _fetch(src, tmp_path / "c", DEAD)


def test_registry_down_is_one_line_and_doctor_says_how(tmp_path):
    with pytest.raises(K.KyuaError, match="^GET .* failed: ") as e:
        _fetch(tmp_path, tmp_path / "c", DEAD)
    assert "\n" not in str(e.value)
    why = K.registry_problem(str(tmp_path / "c"), registry=DEAD)
    assert "refused" in why and f"better-sqlite3-12.9.0.tgz into {tmp_path / 'c'}" in why
    assert "\n" not in why


def test_registry_problem_none_when_the_registry_answers(tmp_path, registry):
    reg = registry(version="12.9.0")
    assert K.registry_problem(str(tmp_path), registry=reg.url) is None
    assert reg.requests == ["/better-sqlite3/12.9.0"]


def test_package_names():
    assert K.split_package("better-sqlite3@12.9.0") == ("better-sqlite3", "12.9.0")
    assert K.split_package("@scope/pkg@1.2.3") == ("@scope/pkg", "1.2.3")
    assert K.tarball_name("@scope/pkg@1.2.3") == "pkg-1.2.3.tgz"
    assert K.metadata_url(K.SQLITE_NPM) == "https://registry.npmjs.org/better-sqlite3/12.9.0"
    for bad in ("better-sqlite3", "better-sqlite3@^12", "@12.9.0"):
        with pytest.raises(K.KyuaError, match="not NAME@X.Y.Z"):
            K.split_package(bad)


def test_integrity_strings():
    # SRI of the empty string (sha256 and sha512: well-known digests)
    assert K.integrity_of(b"", "sha256") == "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    assert K.integrity_of(b"").startswith("sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXc")
    assert K.integrity_matches(b"", "sha1-x " + K.integrity_of(b"", "sha256"))
    assert not K.integrity_matches(b"x", K.integrity_of(b""))
    assert not K.integrity_matches(b"", "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=")  # sha1: unknown


def test_kyua_widens_the_sshd_world():
    v = sshworld.ssh_make_vars(kyua=True)
    assert "usr.bin/kyua" in v["SUBDIR_OVERRIDE"].split()
    assert {"lib/libc++", "lib/liblua", "lib/libsqlite3"} <= set(v["_prebuild_libs"].split())
    assert "lib/liblutok" in v["_generic_libs"].split()
    assert "usr.bin/kyua" not in sshworld.ssh_make_vars()["SUBDIR_OVERRIDE"].split()
    files = K.guest_files("/src")
    assert files["usr/share/kyua/store/schema_v3.sql"] == "/src/contrib/kyua/store/schema_v3.sql"


def test_kyua_brings_jail8_for_execenv_jail_cases():
    """kyua runs an ``execenv = jail`` case through /usr/sbin/jail; the first
    guest run without it reported every series case broken. jail(8) links
    libjail, libkvm and libutil, and libkvm libelf (usr.sbin/jail/Makefile)."""
    v = sshworld.ssh_make_vars(kyua=True)
    assert K.KYUA_PROGRAMS["/usr/sbin/jail"] == "usr.sbin/jail/jail"
    assert "usr.sbin/jail" in v["SUBDIR_OVERRIDE"].split()
    libs = set(v["_prebuild_libs"].split())
    assert {"lib/libjail", "lib/libkvm", "lib/libelf", "lib/libutil"} <= libs
    assert "usr.sbin/jail" not in sshworld.ssh_make_vars()["SUBDIR_OVERRIDE"].split()


def test_a_reapplied_tree_gets_the_packages_header_back(tmp_path, registry):
    """A series re-apply (git checkout -f of the base) restores the tree's sqlite3.h
    and leaves the package's untracked sqlite3.c: the pair is put back, not refused."""
    src, cache = tmp_path / "src", tmp_path / "cache"
    (src / "contrib/sqlite3").mkdir(parents=True)
    hdr = src / "contrib/sqlite3/sqlite3.h"
    hdr.write_text('#define SQLITE_VERSION "3.44.0"\n')
    reg = registry()
    assert _fetch(src, cache, reg.url) == "3.50.4"
    hdr.write_text('#define SQLITE_VERSION "3.44.0"\n')     # the checkout -f
    lines = []
    assert _fetch(src, cache, reg.url, lines=lines) == "3.50.4"
    assert "3.50.4" in hdr.read_text()
    assert any("put back" in ln for ln in lines)


def test_a_foreign_sqlite3_c_of_another_release_is_still_refused(tmp_path, registry):
    src, cache = tmp_path / "src", tmp_path / "cache"
    (src / "contrib/sqlite3").mkdir(parents=True)
    reg = registry()
    assert _fetch(src, cache, reg.url) == "3.50.4"
    (src / "contrib/sqlite3/sqlite3.c").write_text('#define SQLITE_VERSION "3.51.0"\n')
    before = (src / "contrib/sqlite3/sqlite3.h").read_text()
    with pytest.raises(K.KyuaError, match="are not one release: rm the .c"):
        _fetch(src, cache, reg.url)
    assert (src / "contrib/sqlite3/sqlite3.h").read_text() == before
