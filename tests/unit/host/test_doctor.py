"""rxl doctor: every program a stage starts is on its list; install = update + one call."""

import ast
import os
from pathlib import Path

import pytest

from rxl.host import doctor as D

HARNESS = Path(D.__file__).resolve().parents[1]

#: Wrappers whose argument list starts another program: (name, args before it).
WRAPPERS = {"flock": 1, "env": None}


@pytest.fixture(autouse=True)
def _registry_offline(monkeypatch):
    """No test here talks to the npm registry: kyua's amalgamation counts as available
    unless a test says otherwise (rxl.tree.kyuaworld's own tests use a real server)."""
    from rxl.tree import kyuaworld
    monkeypatch.setattr(kyuaworld, "registry_problem", lambda *a, **k: None)


def _programs(argv):
    """The programs an argv starts: argv[0], and what flock/env run."""
    out = []
    argv = [str(a) for a in argv]
    while argv:
        prog = os.path.basename(argv[0])
        out.append(prog)
        if prog == "flock":
            argv = argv[2:]
        elif prog == "env":
            argv = [a for a in argv[1:] if "=" not in a or a.startswith("-")]
        elif prog.startswith("python") and len(argv) > 1 and argv[1].endswith("make.py"):
            return out  # make.py's own needs are listed by hand (bmake, lex, yacc ...)
        else:
            return out
    return out


def _literal_argv0():
    """(file, program) of every subprocess call whose argv starts with a string literal,
    given in the call or through a variable assigned a list literal."""
    found = []
    for path in HARNESS.rglob("*.py"):
        tree = ast.parse(path.read_text())
        lists = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.List) and \
                    len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                lists.setdefault(node.targets[0].id, []).append(node.value)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
                    node.func.attr in ("run", "Popen", "check_output", "call") and
                    isinstance(node.func.value, ast.Name) and
                    node.func.value.id == "subprocess" and node.args):
                continue
            arg = node.args[0]
            cands = [arg] if isinstance(arg, ast.List) else \
                lists.get(arg.id, []) if isinstance(arg, ast.Name) else []
            for lst in cands:
                first = lst.elts[0] if lst.elts else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.append((path.relative_to(HARNESS).as_posix(), first.value))
    return found


def _builder_argvs(tmp_path):
    """argvs from the stages' argv builders (build, world, rig, qemu, learnd, kcount,
    the cores, the base fetch)."""
    from rxl.bench import kcount
    from rxl.decide import core
    from rxl.guest import qemu
    from rxl.learn import plan as learn
    from rxl.tree import base as basetree
    from rxl.tree import build, rig, world
    src, obj = str(tmp_path / "src"), str(tmp_path / "obj")
    argvs = [list(s.argv) for s in build.plan_stages(src, obj)]
    argvs += [list(s.argv) for s in world.plan_world(src, obj)]
    argvs.append(world.atf_cc_argv("t.c", "t", "/sysroot"))
    argvs.append(qemu.build_argv(qemu.GuestConfig(root_dir=str(tmp_path)), firmware="/fw"))
    argvs.append(learn.learnd_cc_argv("l.c", "l", "/sysroot", lb_cpu_opt=None))
    argvs.append(kcount.gdb_argv("/k", "127.0.0.1:1", "/o", "/s", samples=1, entries={kcount.OUTER: 1}))
    argvs.append(core.build_argv(tmp_path / "lib.so"))
    argvs += basetree.fetch_plan("https://example.org/r.git", "a" * 40, "/d")
    argvs += basetree.fetch_plan(str(tmp_path), "a" * 40, "/d")
    plan = rig.plan_rig(src, str(tmp_path / "g"), {"patched": "a" * 40}, [])
    argvs += [list(s.argv) for s in plan.steps]
    return argvs


def test_every_program_the_stages_start_is_on_the_list(tmp_path, monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    names = D.tool_names()
    progs = {p for a in _builder_argvs(tmp_path) for p in _programs(a)}
    progs |= {p for _, p in _literal_argv0()}
    # apt-get is what installs the list (doctor --install), not a need of a stage.
    progs -= {"apt-get"}
    missing = sorted(progs - names)
    assert not missing, f"not in rxl doctor's list: {missing}"
    # The scan really found the stages' programs (a scan that finds nothing passes anything).
    for p in ("git", "flock", "env", "python3", "qemu-system-x86_64", "clang", "gdb", "nm",
              "cc", "mandoc", "perl", "cp", "mv", "mkdir"):
        assert p in progs, p


def test_make_py_needs_are_listed():
    """What a fresh Debian 12 lacked for kernel-toolchain, and the rest of
    make.py's bootstrap on Linux."""
    pkgs = {n.package for n in D.NEEDS}
    for pkg in ("flex", "bison", "libarchive-dev", "libbz2-dev", "bmake", "clang-16",
                "lld-16", "llvm-16", "qemu-system-x86", "ovmf", "gdb", "binutils",
                "mandoc", "git", "util-linux", "build-essential", "libbpf-dev", "clang"):
        assert pkg in pkgs, pkg
    names = D.tool_names()
    for tool in ("lex", "yacc", "archive.h", "bzlib.h", "clang", "clang++", "clang-cpp",
                 "ld.lld"):
        assert tool in names, tool


def test_install_is_one_update_then_one_install_of_the_missing():
    res = D.check(which=lambda n: None if n in ("lex", "yacc", "bmake") else "/usr/bin/" + n,
                  isfile=lambda p: not p.endswith("bzlib.h"), qemu_ver=lambda: (10, 0),
                  ovmf=lambda: "/usr/share/OVMF/OVMF_CODE.fd")
    missing = [r for r in res if not r.ok]
    assert {r.need.name for r in missing} == {"lex", "yacc", "bmake", "bzlib.h"}
    cmds = D.install_commands(res)
    assert cmds == [["apt-get", "update"],
                    ["apt-get", "install", "-y", "bison", "bmake", "flex", "libbz2-dev"]]
    ran = []

    class CP:
        returncode = 0
    assert D.install(res, echo=lambda s: None, run=lambda c, env: ran.append(c) or CP(),
                     euid=0) is None
    assert ran == cmds
    reason = D.install(res, run=lambda c, env: 1 / 0, euid=1000)
    assert reason.startswith("not root") and "sudo apt-get update" in reason
    assert D.install_commands([r for r in res if r.ok]) == []


def test_old_qemu_counts_as_missing():
    """The default guest's igb needs QEMU 8.0: Debian 12's 7.2 is missing (the note
    says the e1000e target still runs there), older than 7.2 runs nothing."""
    def q(v):
        return {r.need.name: r for r in D.check(
            which=lambda n: "/usr/bin/" + n, isfile=lambda p: True, qemu_ver=lambda: v,
            ovmf=lambda: "/fw", registry=lambda: None)}["qemu-system-x86_64"]
    assert (D.QEMU_MIN, D.QEMU_WANT) == ((7, 2), (8, 0))
    old = q((7, 2))
    assert not old.ok and old.note == ("7.2, the default guest needs >= 8.0 (igb); "
                                       "7.2 still runs --target guest-e1000e")
    assert not q((6, 2)).ok and "still runs" not in q((6, 2)).note
    assert not q((7, 1)).ok
    assert q((8, 0)).ok and q((10, 0)).ok and q((10, 0)).note == "10.0"
    unknown = q(None)
    assert unknown.ok and unknown.note == "version unknown"


_SOURCES_822 = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def _qemu_missing():
    need = next(n for n in D.NEEDS if n.name == "qemu-system-x86_64")
    bmake = next(n for n in D.NEEDS if n.name == "bmake")
    return [D.Result(need, False, "7.2"), D.Result(bmake, False)]


def test_debian_12_gets_qemu_from_bookworm_backports_beside_its_own_mirror():
    """The suite line goes beside the machine's own mirror (deb822 or one-line
    sources), written first; QEMU then comes from the suite alone, without
    recommends; the other packages as always."""
    line = ("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
            "http://mirror.example/debian bookworm-backports main")
    path = "/etc/apt/sources.list.d/rxl-bookworm-backports.list"
    assert D.backports_source("bookworm", _SOURCES_822) == (path, line)
    assert D.install_commands(_qemu_missing(), "bookworm", _SOURCES_822) == [
        ["sh", "-c", f"echo '{line}' > {path}"],
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "bmake"],
        ["apt-get", "install", "-y", "--no-install-recommends", "-t", "bookworm-backports",
         "qemu-system-x86"]]
    one_line = "deb [arch=amd64] http://ftp.example/debian/ bookworm main contrib\n"
    assert D.debian_mirror(one_line, "bookworm") == "http://ftp.example/debian/"
    assert D.debian_mirror("", "bookworm") == D.DEBIAN_MIRROR
    note = D.backports_note("bookworm", _SOURCES_822)
    assert note.startswith("adding the bookworm-backports suite for QEMU >= 8.0: ")
    assert line in note and f"(undo: rm {path} && apt-get update;" in note


def test_backports_line_is_added_once_and_only_where_it_helps():
    with_bpo = _SOURCES_822 + "\nTypes: deb\nURIs: http://x/debian\nSuites: bookworm-backports\n"
    cmds = D.install_commands(_qemu_missing(), "bookworm", with_bpo)
    assert cmds[0] == ["apt-get", "update"] and cmds[-1][-3:] == [
        "-t", "bookworm-backports", "qemu-system-x86"]
    assert D.backports_note("bookworm", with_bpo) == ""
    # Debian 13 (QEMU 10 in its own suite) and other systems: the plain package.
    for codename in ("trixie", ""):
        assert D.install_commands(_qemu_missing(), codename, _SOURCES_822) == [
            ["apt-get", "update"], ["apt-get", "install", "-y", "bmake", "qemu-system-x86"]]
    ran, said = [], []

    class CP:
        returncode = 0
    assert D.install(_qemu_missing(), echo=said.append, run=lambda c, env: ran.append(c) or CP(),
                     euid=0, codename="bookworm", sources=_SOURCES_822) is None
    assert ran == D.install_commands(_qemu_missing(), "bookworm", _SOURCES_822)
    assert said[0] == D.backports_note("bookworm", _SOURCES_822)
    reason = D.install(_qemu_missing(), run=lambda c, env: 1 / 0, euid=1000,
                       codename="bookworm", sources=_SOURCES_822)
    assert reason.startswith("not root") and "sudo sh -c 'echo '\"'\"'deb [signed-by=" in reason
    adv = D.advice(_qemu_missing(), codename="bookworm", sources=_SOURCES_822)
    assert adv[0].startswith("adding the bookworm-backports suite") and adv[1].startswith(
        "install: sh -c ")


def test_release_reads_os_release(tmp_path):
    f = tmp_path / "os-release"
    f.write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'
                 'VERSION_CODENAME=bookworm\n')
    assert D.release(str(f)) == "bookworm"
    f.write_text("ID=ubuntu\nVERSION_CODENAME=noble\n")
    assert D.release(str(f)) == ""
    assert D.release(str(tmp_path / "none")) == ""


def _fake_check(missing):
    def check(*a, **k):
        return [D.Result(n, n.name not in missing) for n in D.NEEDS]
    return check


def test_cli_json_and_table_name_packages_and_exit_by_missing(monkeypatch):
    import json
    from click.testing import CliRunner
    from rxl.host import cli
    monkeypatch.setattr(D, "check", _fake_check({"lex", "bmake"}))
    r = CliRunner().invoke(cli.doctor_cmd, ["--json"])
    assert r.exit_code == 1
    assert r.stderr == "Error: 2 missing: bmake, lex\n"  # --json keeps the Error line
    doc = {d["name"]: d for d in json.loads(r.stdout)}
    assert doc["lex"] == {"name": "lex", "ok": False, "package": "flex",
                          "stages": ["build", "world"], "note": "",
                          "install": "apt-get install -y flex"}
    assert doc["git"]["ok"] is True
    r = CliRunner().invoke(cli.doctor_cmd, [])
    assert r.exit_code == 1
    # the advice is the report's (stdout); stderr is the one Error line
    assert "install: apt-get update && apt-get install -y bmake flex" in r.stdout
    assert r.stderr == "Error: 2 missing: bmake, lex\n"
    monkeypatch.setattr(D, "check", _fake_check(set()))
    assert CliRunner().invoke(cli.doctor_cmd, []).exit_code == 0


def test_cli_install_not_root_says_the_sudo_lines(monkeypatch):
    from click.testing import CliRunner
    from rxl.host import cli
    monkeypatch.setattr(D, "check", _fake_check({"yacc"}))
    monkeypatch.setattr(D.os, "geteuid", lambda: 1000)
    r = CliRunner().invoke(cli.doctor_cmd, ["--install"])
    assert r.exit_code == 1
    assert "sudo apt-get update  &&  sudo apt-get install -y bison" in r.stderr


def test_modes_bhyve_alone_ssh_without_qemu():
    guest = [n.name for n in D.for_mode("guest")]
    ssh = [n.name for n in D.for_mode("ssh")]
    # the own guest boots QEMU and talks SSH to it; a target needs SSH, no QEMU
    assert "python: paramiko" in guest and "python: paramiko" in ssh
    # the own guest's sshd userland also needs OpenSSH's configure (autoconf,
    # aclocal) and, for kyua, the SQLite amalgamation (no npm: a plain HTTPS
    # fetch); an SSH target needs none of them
    own = ("qemu-system-x86_64", "OVMF", "autoconf", "aclocal", "SQLite amalgamation")
    assert all(n in guest for n in own) and not any(n in ssh for n in own)
    # ... nor what only kcount, the series check and the benches use
    assert ssh == [n for n in guest if n not in own
                   and not set(D.NEEDS[[x.name for x in D.NEEDS].index(n)].stages)
                   <= D.NOT_FOR_TARGET]
    bhyve = D.check(mode="bhyve", which=lambda n: None, isfile=lambda p: False)
    assert [r.need.name for r in bhyve] == ["bhyve", "bhyvectl", "BHYVE_UEFI.fd"]
    assert not any(r.ok for r in bhyve)
    assert D.install_commands(bhyve) == []          # nothing apt-get can install
    assert bhyve[2].install_line() == "pkg install edk2-bhyve"
    import pytest
    with pytest.raises(ValueError, match="unknown mode"):
        D.for_mode("kvm")


def test_missing_ovmf_is_missing_and_installed():
    """The firmware is found by rxl.guest.qemu.find_ovmf on the real host; a fresh
    machine has none (the cold run), which is the package ovmf."""
    res = {r.need.name: r for r in D.check(which=lambda n: "/usr/bin/" + n,
                                           isfile=lambda p: True, qemu_ver=lambda: (10, 0),
                                           ovmf=lambda: None)}
    assert not res["OVMF"].ok
    assert D.install_commands(list(res.values()))[-1] == ["apt-get", "install", "-y", "ovmf"]


def test_install_missing_installs_then_checks_again():
    """doctor --install's flow, outside the CLI: nothing runs when nothing is
    missing; a refusal (not root) returns the reason and the results unchanged."""
    res = D.check(which=lambda n: None if n == "bmake" else "/usr/bin/" + n,
                  isfile=lambda p: True, qemu_ver=lambda: (10, 0), ovmf=lambda: "/fw")
    after, why = D.install_missing([r for r in res if r.ok], recheck=lambda: 1 / 0)
    assert why is None and all(r.ok for r in after)
    import os
    if os.geteuid() != 0:
        after, why = D.install_missing(res, recheck=lambda: 1 / 0)
        assert why.startswith("not root") and after == res
    bad = [r for r in res if not r.ok]
    assert [D.row(r) for r in bad] == [
        "MISSING  bmake                build, world             make.py's bootstrap"
        "  [apt-get install -y bmake]"]
    assert D.advice(bad) == ["install: apt-get update && apt-get install -y bmake"]


def test_bench_mode_adds_privilege_and_kernel(monkeypatch):
    from rxl.bench import ebpf_host as H
    names = {n.name for n in D.for_mode("bench")}
    assert {"BPF privilege", "Linux >= 5.12", "libbpf.h", "bmake"} <= names
    assert "BPF privilege" not in {n.name for n in D.for_mode("guest")}
    monkeypatch.setattr(H, "privilege_problem", lambda: "loading BPF needs root")
    monkeypatch.setattr(H, "kernel_problem", lambda: "Linux 5.10 is older than 5.12")
    bench = [n for n in D.NEEDS if n.mode == "bench"]
    res = {r.need.name: r for r in D.check(bench)}
    assert not res["BPF privilege"].ok and "root" in res["BPF privilege"].install_line()
    assert not res["Linux >= 5.12"].ok and res["Linux >= 5.12"].note.startswith("Linux 5.10")
    assert D.install_commands(list(res.values())) == []   # no package makes them right


def test_make_py_host_tools_outside_essential_are_listed():
    """A bare Debian 12 root failed kernel-toolchain with "Cannot find host tool
    'time' in PATH": every host tool make.py links whose package is
    not Essential is a need, with that package."""
    by_name = {n.check[4:]: n.package for n in D.NEEDS if n.check.startswith("bin:")}
    assert D.MAKE_PY_HOST_TOOLS["time"] == "time"
    extra = {t: p for t, p in D.MAKE_PY_HOST_TOOLS.items() if p not in D.DEBIAN_ESSENTIAL}
    assert {"time", "bzip2", "bunzip2", "xz", "unxz", "patch"} == set(extra)
    for pkg in set(extra.values()):
        assert any(p == pkg for p in by_name.values()), pkg
    for tool, pkg in extra.items():
        assert tool not in by_name or by_name[tool] == pkg, tool


def test_a_host_without_time_is_told_to_install_it():
    import shutil
    res = {r.need.name: r for r in D.check(
        mode="guest", which=lambda p: None if p == "time" else shutil.which(p),
        qemu_ver=lambda: (10, 0), ovmf=lambda: "/fw")}
    assert not res["time"].ok and res["time"].install_line() == "apt-get install -y time"
    assert ["apt-get", "install", "-y", "time"] == D.install_commands([res["time"]])[1]


def test_kyua_amalgamation_is_checked_and_not_an_apt_package():
    """guest up --kyua needs better-sqlite3's tarball (cached or the registry
    reachable): the reason is the note, the advice is not an apt-get line."""
    why = "GET https://registry.npmjs.org/better-sqlite3/12.9.0 failed: refused; or put ..."
    res = {r.need.name: r for r in D.check(which=lambda n: "/usr/bin/" + n,
                                           isfile=lambda p: True, qemu_ver=lambda: (10, 0),
                                           ovmf=lambda: "/fw", registry=lambda: why)}
    r = res["SQLite amalgamation"]
    assert not r.ok and r.note == why
    assert "registry.npmjs.org" in r.install_line()
    assert D.install_commands([r]) == []
    assert "npm" not in D.tool_names()          # no npm program is needed any more
    ok = D.check([D.NEEDS[[n.name for n in D.NEEDS].index("SQLite amalgamation")]],
                 registry=lambda: None)
    assert ok[0].ok


def test_for_ssh_checks_what_a_target_run_needs_only():
    """--for ssh checked gdb, valgrind, mandoc and libbpf, which a run
    against a target never uses; it keeps the build tools and paramiko."""
    from rxl.host import doctor as D
    names = {n.name for n in D.for_mode("ssh")}
    assert {"python: paramiko", "clang-16", "bmake", "git"} <= names
    assert not names & {"gdb", "nm", "valgrind", "mandoc", "perl", "libbpf.h",
                        "qemu-system-x86_64", "OVMF", "autoconf"}
    assert {"gdb", "valgrind", "mandoc"} <= {n.name for n in D.for_mode("guest")}
