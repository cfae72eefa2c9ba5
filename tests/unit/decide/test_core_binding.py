"""rxl.decide.core's errors: a compiler that is not there, a topology the C
refuses (lib/userspace/rxlcore.c rxl_topo_new()), a group of no members."""

from types import SimpleNamespace

import pytest

from rxl.decide import core, topology


def test_a_missing_compiler_is_named_with_what_to_set(tmp_path, monkeypatch):
    monkeypatch.delenv("RXL_CORE_CC", raising=False)
    monkeypatch.setenv("CC", "/nonexistent/rxl-cc")
    monkeypatch.setenv("RXL_BUILD_DIR", str(tmp_path))
    with pytest.raises(core.CoreError) as exc:
        core.build(force=True)
    assert str(exc.value) == ("building the C cores: /nonexistent/rxl-cc: No such file or "
                              "directory (/nonexistent/rxl-cc); set CC or RXL_BUILD_DIR")


def test_a_topology_the_c_refuses_is_a_core_error():
    """rxl_topo_new() returns NULL unless the first group is the root (parent -1)."""
    root = topology.load("qemu-2s").root
    bad = SimpleNamespace(name="rootless", bfs=lambda: [(root, 0)])
    with pytest.raises(core.CoreError, match="^the C rejected topology rootless$"):
        core.CTopology(bad)


def test_a_group_of_no_members_is_refused_by_lbdeal():
    ctopo = core.CTopology(topology.load("qemu-2s"))
    with pytest.raises(core.CoreError, match="^lbdeal refused a group of 0 members$"):
        core.deal_raw(ctopo, [], {})


def test_deal_and_select_take_what_the_model_takes():
    """core.deal and core.select refuse what model.deal and model.select do,
    with the same errors, before the C is asked."""
    from rxl.decide import model
    topo = topology.load("qemu-2s")
    with pytest.raises(ValueError, match=f"^a group holds 1 to {model.MAX_MEMBERS} members, "
                                         "not 0$"):
        core.deal(topo, [], {})
    with pytest.raises(ValueError, match="^an empty group has no member to select$"):
        core.select(None, 0, 0, 0)


# ---- issue 27, eighth pass, faults 1 and 2: a CC that makes no loadable library

def _fake_cc(tmp_path, body):
    cc = tmp_path / "fakecc"
    cc.write_text("#!/bin/sh\n" + body)
    cc.chmod(0o755)
    return cc


def _deal_cli(monkeypatch):
    from click.testing import CliRunner
    from rxl.cli.main import main
    monkeypatch.setattr(core, "_lib", None)
    return CliRunner().invoke(main, ["deal", "--topology", "2x4x2", "--members", "0"])


def test_a_cc_that_writes_no_library_is_one_error_line(tmp_path, monkeypatch):
    """Fault 1: CC=/bin/true exits 0 and writes nothing: os.replace() raised
    FileNotFoundError as a traceback."""
    monkeypatch.delenv("RXL_CORE_CC", raising=False)
    monkeypatch.setenv("CC", "/bin/true")
    monkeypatch.setenv("RXL_BUILD_DIR", str(tmp_path / "bd"))
    r = _deal_cli(monkeypatch)
    assert r.exit_code == 1, (r.exit_code, r.output, r.exception)
    assert r.stdout == ""
    (line,) = r.stderr.splitlines()
    tmp = core.library_path().with_suffix(f".{__import__('os').getpid()}.tmp")
    assert line == (f"Error: building the C cores: /bin/true exited 0 but wrote no library "
                    f"({tmp}); set CC to a C compiler")
    assert list((tmp_path / "bd").iterdir()) == []


def test_a_cc_that_writes_junk_is_refused_and_not_cached(tmp_path, monkeypatch):
    """Fault 2: a CC writing 'junk' to its -o file: dlopen's OSError was a
    traceback, and the junk .so stayed, so every later run failed the same way."""
    cc = _fake_cc(tmp_path, 'while [ $# -gt 1 ]; do shift; done\n'
                            'for a in "$@"; do :; done\necho junk > "$a"\n')
    monkeypatch.delenv("RXL_CORE_CC", raising=False)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setenv("RXL_BUILD_DIR", str(tmp_path / "bd"))
    for _ in range(2):  # the second run meets no cached junk: the same line
        r = _deal_cli(monkeypatch)
        assert r.exit_code == 1, (r.exit_code, r.output, r.exception)
        (line,) = r.stderr.splitlines()
        name = core.library_path().with_suffix(f".{__import__('os').getpid()}.tmp").name
        assert line == (f"Error: building the C cores: {cc} made {name}, which does not "
                        "load as a shared library (file too short); deleted it; set CC "
                        "to a C compiler")
        assert list((tmp_path / "bd").iterdir()) == []


def test_a_cached_library_that_does_not_load_is_deleted(tmp_path, monkeypatch):
    """A junk .so already in RXL_BUILD_DIR (left by an older harness) is
    deleted when it fails to load, so the next run builds afresh."""
    monkeypatch.setenv("RXL_BUILD_DIR", str(tmp_path))
    out = core.library_path()
    out.write_text("junk\n")
    monkeypatch.setattr(core, "_lib", None)
    with pytest.raises(core.CoreError, match=r"which does not load as a shared library "
                                             r"\(file too short\); deleted it"):
        core.lib()
    assert not out.exists()
