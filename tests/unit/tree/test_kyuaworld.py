"""rxl.tree.kyuaworld: the SQLite amalgamation from an npm tarball, kyua's plan."""

import io
import subprocess
import tarfile

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


def _npm(cache, **kw):
    """A stand-in for subprocess.run that does what `npm pack` does: a tarball in cache."""
    calls = []

    def run(argv, **_):
        calls.append(argv)
        name = "better-sqlite3-12.9.0.tgz"
        _tarball(cache / name, **kw)
        return subprocess.CompletedProcess(argv, 0, stdout=name + "\n", stderr="")
    return run, calls


def test_fetch_puts_both_files_of_one_release(tmp_path):
    src, cache = tmp_path / "src", tmp_path / "cache"
    (src / "contrib/sqlite3").mkdir(parents=True)
    (src / "contrib/sqlite3/sqlite3.h").write_text('#define SQLITE_VERSION "3.44.0"\n')
    run, calls = _npm(cache)
    lines = []
    assert K.fetch_amalgamation(str(src), str(cache), run=run, echo=lines.append) == "3.50.4"
    assert calls == [["npm", "pack", K.SQLITE_NPM, "--pack-destination", str(cache),
                      "--silent"]]
    assert "3.50.4" in (src / "contrib/sqlite3/sqlite3.h").read_text()
    assert "amalgamation" in (src / "contrib/sqlite3/sqlite3.c").read_text()
    assert any("undo" in ln for ln in lines)
    # present now: nothing fetched again
    assert K.fetch_amalgamation(str(src), str(cache), run=run, echo=lines.append) == "3.50.4"
    assert len(calls) == 1


def test_fetch_refuses_mixed_releases_and_missing_members(tmp_path):
    src = tmp_path / "src"
    (src / "contrib/sqlite3").mkdir(parents=True)
    run, _ = _npm(tmp_path / "c1", h_version="3.49.0")
    with pytest.raises(K.KyuaError, match="not one release"):
        K.fetch_amalgamation(str(src), str(tmp_path / "c1"), run=run, echo=lambda s: None)
    run, _ = _npm(tmp_path / "c2", members={"package/README.md": "x"})
    with pytest.raises(K.KyuaError, match="no deps/sqlite3"):
        K.fetch_amalgamation(str(src), str(tmp_path / "c2"), run=run, echo=lambda s: None)
    assert not (src / "contrib/sqlite3/sqlite3.c").exists()  # nothing half-written


def test_npm_failure_is_one_line(tmp_path):
    def run(argv, **_):
        return subprocess.CompletedProcess(argv, 1, stdout="", stderr="npm ERR! 404\n")
    with pytest.raises(K.KyuaError, match="npm pack .* failed: npm ERR! 404"):
        K.fetch_amalgamation(str(tmp_path), str(tmp_path / "c"), run=run, echo=lambda s: None)


def test_kyua_widens_the_sshd_world():
    v = sshworld.ssh_make_vars(kyua=True)
    assert "usr.bin/kyua" in v["SUBDIR_OVERRIDE"].split()
    assert {"lib/libc++", "lib/liblua", "lib/libsqlite3"} <= set(v["_prebuild_libs"].split())
    assert "lib/liblutok" in v["_generic_libs"].split()
    assert "usr.bin/kyua" not in sshworld.ssh_make_vars()["SUBDIR_OVERRIDE"].split()
    files = K.guest_files("/src")
    assert files["usr/share/kyua/store/schema_v3.sql"] == "/src/contrib/kyua/store/schema_v3.sql"
