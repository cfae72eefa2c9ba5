"""Issue 27's fifteenth pass (/work/coord/nc15.md; docs/results/newcomer.md,
"Fifteenth pass"): faults 1, 2, 5, 6, 9, 10, 11, 12, 16 and 18, each as
the newcomer met it."""

from pathlib import Path

import pytest

from clierror import error_line, run as _run, work  # noqa: F401 (work: fixture)

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data"
PASS_LOG = DATA / "console" / "synthetic-pass.log"


# ------------------------------------------------ 1: a sentinel other text stands before

def _log_with(tmp_path, prefix_of):
    """synthetic-pass.log with line N prefixed by ``prefix_of[N]``."""
    lines = PASS_LOG.read_text().splitlines()
    out = [prefix_of.get(n, "") + line for n, line in enumerate(lines, 1)]
    path = tmp_path / "p.log"
    path.write_text("\n".join(out) + "\n")
    return path


@pytest.mark.parametrize("prefix", ["[  12.345] ", " ", "em0: link state changed to UP",
                                    "x"])
def test_parse_reads_a_case_line_after_console_text_and_names_it(tmp_path, prefix):
    from rxl.verify import parse
    log = _log_with(tmp_path, {52: prefix, 53: prefix})
    r = _run(["parse", log])
    assert r.exit_code == 0, r.output
    res = parse.parse_file(str(log))
    assert res.outcome == "completed"
    assert [c.status for c in res.cases] == ["passed", "passed"]
    for n in (52, 53):
        assert f"line {n}: console text before the sentinel on its line ('{prefix}'): " \
            "the sentinel read from ==RXL== on" in res.notes


def test_parse_reads_an_end_marker_after_console_text(tmp_path):
    """nc15's midend.log: ``x==RXL== END patched`` is the END, not "no end marker"."""
    from rxl.verify import parse
    res = parse.parse_file(str(_log_with(tmp_path, {55: "x"})))
    assert res.outcome == "completed", res.notes
    assert not any("no end marker" in n for n in res.notes)
    assert "line 55: console text before the sentinel on its line ('x'): the sentinel " \
        "read from ==RXL== on" in res.notes


def test_parse_reads_a_panic_in_the_text_before_a_sentinel(tmp_path):
    from rxl.verify import parse
    res = parse.parse_file(str(_log_with(tmp_path, {53: "panic: page fault"})))
    assert res.outcome == "panic"
    assert res.panic_lines == ["panic: page fault"]


def test_two_runs_split_at_a_begin_after_console_text(tmp_path):
    from rxl.verify import parse
    lines = PASS_LOG.read_text().splitlines()
    two = lines + ["[ 99.0] " + lines[6].replace("patched", "pristine")] + \
        [ln.replace("END patched", "END pristine") for ln in lines[7:]]
    runs = parse.parse_runs(two)
    assert [(r.label, r.outcome) for r in runs] == [("patched", "completed"),
                                                    ("pristine", "completed")]


def test_console_watch_sees_an_end_marker_after_console_text(tmp_path):
    from rxl.guest.console import Transport, watch

    class Once(Transport):
        def __init__(self):
            self.steps = [b"==RXL== BEGIN x\n", b"em0: link state changed to UP==RXL== END x\n",
                          None]

        def start(self):
            pass

        def read(self, timeout):
            return self.steps.pop(0)

        def alive(self):
            return True

        def stop(self):
            return 0

    seen = []
    res = watch(Once(), str(tmp_path / "c.log"), echo=seen.append)
    assert seen == ["==RXL== BEGIN x", "==RXL== END x"]
    assert res.marks == seen


def test_learn_log_reads_a_learn_line_after_console_text():
    from rxl.learn.results import parse_learn
    runs = parse_learn(["==RXL== LEARN BEGIN a", "[ 1.0] ==RXL== LEARN READY a"])
    assert runs["a"].ready
    assert runs["a"].notes == ["line 2: console text before the sentinel on its line "
                               "('[ 1.0] '): the sentinel read from ==RXL== on"]


# ------------------------------------------------ 2: a relative HOME or XDG_CACHE_HOME

def test_a_relative_home_is_refused_as_a_relative_rxl_work(tmp_path, monkeypatch):
    monkeypatch.delenv("RXL_WORK")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", "relative")
    monkeypatch.chdir(tmp_path)
    for args in (["targets", "--key"], ["run", "--check-only"]):
        assert error_line(args) == (
            "Error: the work root relative/.cache/rxl (RXL_WORK unset): not an absolute "
            "path, as HOME relative is not (every command of every directory must find "
            "the same work root; set RXL_WORK)")
    assert list(tmp_path.iterdir()) == []


def test_a_relative_xdg_cache_home_is_ignored(tmp_path, monkeypatch):
    """The XDG Base Directory Specification: a relative path there is invalid
    and ignored; the root is HOME's."""
    from rxl import paths
    monkeypatch.delenv("RXL_WORK")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    monkeypatch.setenv("XDG_CACHE_HOME", "rel2")
    monkeypatch.chdir(tmp_path)
    assert paths.work_root() == tmp_path / "h" / ".cache" / "rxl"
    r = _run(["targets", "--key"])
    assert r.exit_code == 0, r.output
    assert r.stderr.startswith(f"# {tmp_path}/h/.cache/rxl/ssh/id_ed25519.pub: ")
    assert not (tmp_path / "rel2").exists()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert paths.work_root() == tmp_path / "x" / "rxl"


# ------------------------------------------------ 11: targets --key with its .pub removed

def test_targets_key_writes_a_removed_pub_again(work):
    r = _run(["targets", "--key"])
    assert r.exit_code == 0, r.output
    pub = work / "w" / "ssh" / "id_ed25519.pub"
    line = pub.read_text()
    pub.unlink()
    r = _run(["targets", "--key"])
    assert r.exit_code == 0, r.output
    assert r.stdout.split()[:2] == line.split()[:2]
    assert r.stderr.startswith(f"# {pub}: append the line above")
    assert pub.read_text().split()[:2] == line.split()[:2]
    assert pub.read_text().split()[2].startswith("rxl@")


# ------------------------------------------------ 5: doctor --install --for bhyve off FreeBSD

def test_doctor_install_for_bhyve_off_freebsd_is_refused(monkeypatch):
    import platform
    import subprocess
    ran = []
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a))
    assert error_line(["doctor", "--install", "--for", "bhyve"]) == (
        "Error: --install --for bhyve needs a FreeBSD host (this is Linux): bhyve and its "
        "firmware are FreeBSD's; drop --install to list what rxl vm --start needs")
    assert ran == []


def test_doctor_install_names_what_it_cannot_install(monkeypatch):
    """On FreeBSD (no refusal) --install still runs only apt-get: the Error line
    says which of the missing it leaves."""
    import platform
    from rxl.host import doctor
    monkeypatch.setattr(platform, "system", lambda: "FreeBSD")
    bhyve = doctor.check(mode="bhyve", which=lambda n: None, isfile=lambda p: False)
    monkeypatch.setattr(doctor, "check", lambda mode="guest": bhyve)
    r = _run(["doctor", "--install", "--for", "bhyve"])
    assert r.exit_code == 1, r.output
    assert r.stderr == ("Error: 3 missing: bhyve, bhyvectl, BHYVE_UEFI.fd (not by --install, "
                        "which installs Debian packages: bhyve, bhyvectl, BHYVE_UEFI.fd; see "
                        "the lines above)\n")
    r = _run(["doctor", "--for", "bhyve"])
    assert r.stderr == "Error: 3 missing: bhyve, bhyvectl, BHYVE_UEFI.fd\n"


# ------------------------------------------------ 6: a shape whose NIC under test is virtio

VIRTIO_NIC = ("shapes.one.nic: 'virtio-net-pci' is no iflib NIC (its driver, vtnet, has no "
              "iflib core_spread or rx queue CPUs, which the runs set and show; the SSH NIC "
              "alone is virtio): one of e1000e, e1000, igb")


def test_a_virtio_nic_under_test_is_a_mistake_of_the_targets_file(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("shapes:\n  one: {sockets: 1, dies: 1, cores: 1, threads: 1, numa_nodes: 1, "
                 "memory_mib: 256, nic: virtio-net-pci}\n"
                 "  ok: {sockets: 1, dies: 1, cores: 2, threads: 1, numa_nodes: 1, "
                 "memory_mib: 256, nic: e1000}\n"
                 "targets:\n  tiny: {kind: qemu, shape: one}\n")
    r = _run(["targets", "--targets", f])
    assert r.exit_code == 2
    assert r.stdout == f"{f}: {VIRTIO_NIC}\n"
    assert error_line(["run", "--check-only", "--target", "tiny", "--targets", f]) == \
        f"Error: {f}: {VIRTIO_NIC}"
    from rxl.guest import qemu
    assert qemu.IFLIB_NIC_MODELS == ("e1000e", "e1000", "igb")
    assert all(qemu.NIC_DRIVERS[m] != "vtnet" for m in qemu.IFLIB_NIC_MODELS)


# ------------------------------------------------ 9: rxl targets' mistake lines escaped

@pytest.mark.parametrize("name, shown", [("\x1b[2J", "\\x1b[2J"), ("a\x01b", "a\\x01b"),
                                         ("a\tb", "a\\tb"), ("caf\udce9", "caf\\xe9")])
def test_targets_mistake_lines_are_escaped_as_the_error_line(tmp_path, monkeypatch, name,
                                                             shown):
    monkeypatch.chdir(tmp_path)
    r = _run(["targets", "--targets", name])
    assert r.exit_code == 2
    assert r.stdout == f"{shown}: no such file\n"
    assert r.stderr == f"Error: {shown}: 1 mistake (listed above)\n"
    f = tmp_path / (name + ".yaml")
    f.write_bytes("targets:\n  t: {kind: kvm}\n".encode("utf-8", "surrogateescape"))
    r = _run(["targets", "--targets", f])
    assert r.exit_code == 2
    assert r.stdout.startswith(f"{tmp_path}/{shown}.yaml: targets.t.kind: "), r.stdout
    assert all(line.isprintable() for line in r.stdout.splitlines())


# ------------------------------------------------ 10: series check --json names every key

def test_series_check_json_help_names_every_key_it_prints(tmp_path):
    import json
    from fakefreebsd import _tree
    src = tmp_path / "g15"
    _tree(src, major=15)  # a 15 tree without the series
    r = _run(["series", "check", "--json", "--src", src])
    assert r.exit_code == 2, r.output
    keys = list(json.loads(r.stdout))
    assert keys == ["ok", "problems", "tree_problems", "notes"]
    help_text = " ".join(_run(["series", "check", "--help"]).output.split())
    assert "Print {" + ", ".join(f'"{k}"' for k in keys) + "} as JSON" in help_text
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`rxl series check` its problems (`--json`: " + \
        ", ".join(f"`{k}`" for k in keys) + ")" in readme


# ------------------------------------------------ 12: a byte-order mark before an input

BOM = "\ufeff"
VIEW = ("group port 8080 af inet members 2 gen 5 map 32 dirty 0 rebuilds 3 allocfail 0\n"
        "learn window_ms 10000 age_ms 4210 rolls 7\n"
        "rx 0 prev 6756 cur 3301\nrx 4 prev 6793 cur 3350\n"
        "member 0 tag 0 learned slots 16\nmember 1 tag 4 explicit slots 16\n"
        "cpu 0 offset 0 slots 16\ncpu 4 offset 16 slots 16\n")


def test_a_topology_dump_after_a_bom_is_read(tmp_path):
    xml = (DATA / "topology" / "qemu-2s-numa.xml").read_text()
    f = tmp_path / "t-bom.xml"
    f.write_text(BOM + xml)
    plain = _run(["deal", "--topology", DATA / "topology" / "qemu-2s-numa.xml",
                  "--members", "0,1"])
    r = _run(["deal", "--topology", f, "--members", "0,1"])
    assert plain.exit_code == 0 and r.exit_code == 0, r.output
    assert r.stdout.replace(str(f), "T") == \
        plain.stdout.replace(str(DATA / "topology" / "qemu-2s-numa.xml"), "T")
    from rxl.decide import dump
    assert dump.read_source(str(f)) == (xml, str(f))


def test_a_groups_view_after_a_bom_is_read(tmp_path):
    f, g = tmp_path / "view-bom.txt", tmp_path / "view.txt"
    f.write_text(BOM + VIEW)
    g.write_text(VIEW)
    r, plain = _run(["inspect", "--json", f]), _run(["inspect", "--json", g])
    assert r.exit_code == 0, r.output
    assert r.stdout == plain.stdout and r.stderr == plain.stderr == ""


def test_a_console_log_after_a_bom_has_no_text_before_its_first_sentinel(tmp_path):
    from rxl.verify import parse
    lines = PASS_LOG.read_text().splitlines()[6:]  # from ==RXL== BEGIN on
    f = tmp_path / "bom.log"
    f.write_text(BOM + "\n".join(lines) + "\n")
    res = parse.parse_runs(parse.decode(f.read_bytes()).splitlines())[0]
    assert res.outcome == "completed" and res.notes == []


# ------------------------------------------------ 16: one meaning for guest

def test_the_default_guest_is_the_guest_a_targets_file_gives(work):
    from rxl.guest import targets
    from rxl.learn.cli import guest_shape
    from rxl.verify.cli import resolve_target
    assert targets.default_guest() is None  # no file: the built-in
    assert guest_shape(None, None) is None and resolve_target(None, None, False) == (None, None)
    (work / "w").mkdir()
    (work / "w" / "targets.yaml").write_text(
        "shapes:\n  s: {sockets: 1, dies: 1, cores: 1, threads: 1, numa_nodes: 1, "
        "memory_mib: 256, nic: e1000e}\ntargets:\n  guest: {kind: qemu, shape: s}\n")
    own = targets.resolve("guest").shape
    assert (own.vcpus, own.memory_mib) == (1, 256)
    assert targets.default_guest().shape == own
    assert guest_shape(None, None) == own == guest_shape("guest", None)
    assert resolve_target(None, None, False) == (None, own)
    assert error_line(["run", "--check-only", "--memory", "512"]) == (
        "Error: Invalid value for '--memory': the default guest, "
        f"{work}/w/targets.yaml's guest, is a guest shape: its memory_mib sets the "
        "guest's memory")


def test_the_default_guest_of_a_file_that_names_no_guest_is_the_built_in(work):
    from rxl.guest import targets
    (work / "w").mkdir()
    (work / "w" / "targets.yaml").write_text("targets:\n  vm: {kind: bhyve, host: h}\n")
    assert targets.default_guest() is None
    assert targets.resolve("guest").builtin


# ------------------------------------------------ 18: a size cap for kernel files

def test_a_kernel_file_past_the_cap_is_refused_before_it_is_read(tmp_path):
    import time
    from fakefreebsd import kernel_bytes
    from rxl.tree import build
    assert build.MAX_KERNEL_BYTES == 256 << 20
    big = tmp_path / "bigkern"
    big.write_bytes(kernel_bytes())
    os_truncate = __import__("os").truncate
    os_truncate(big, 4 << 30)  # holes: 4 GiB, a few KiB on disk
    ok = tmp_path / "kern"
    ok.write_bytes(kernel_bytes())
    want = (f"Error: Invalid value for '--kernel': {big}: {4 << 30} bytes, over the 256 MiB "
            "of any FreeBSD kernel (tens of MiB), no kernel")
    t0 = time.monotonic()
    assert error_line(["run", "--check-only", "--kernel", big, "--pristine-kernel", ok]) == want
    assert time.monotonic() - t0 < 10
    os_truncate(big, build.MAX_KERNEL_BYTES)  # at the cap: read, and said what it is
    build.check_kernel_file(big)


# ------------------------------------------------ 25: ^C while the commands load

def test_an_interrupt_while_the_commands_load_is_one_line_exit_130(tmp_path):
    """The console script's ``from rxl.cli.main import main`` takes a few tenths
    of a second; a ^C then (here: raised by an import of rxl.learn.cli) ends
    as a ^C later does, not in a traceback."""
    import os
    import subprocess
    import sys
    import rxl
    code = ("import sys\n"
            "class Stop:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'rxl.learn.cli':\n"
            "            raise KeyboardInterrupt\n"
            "sys.meta_path.insert(0, Stop())\n"
            "from rxl.cli.main import main\n"
            "print('not reached')\n")
    env = dict(os.environ, PYTHONPATH=str(Path(rxl.__file__).resolve().parents[1]))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=tmp_path, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (130, "", "Error: interrupted\n")


# ------------------------------------------------ 28: an option name taken as a value

@pytest.mark.parametrize("args, option, value", [
    (["run", "--out", "--check-only"], "--out", "--check-only"),
    (["build", "--src", "t15", "--objdir", "--dry-run"], "--objdir", "--dry-run"),
    (["learn", "--log", "L", "--out", "--json"], "--out", "--json"),
    (["kcount", "record", "--kernel", "kern", "--out", "--dry-run"], "--out", "--dry-run"),
])
def test_an_option_name_as_a_value_is_refused_naming_the_option(tmp_path, monkeypatch, args,
                                                                option, value):
    monkeypatch.chdir(tmp_path)
    assert error_line(args) == (f"Error: Invalid value for '{option}': '{value}' is an option "
                                f"of this command, not a value: give {option} its value (was "
                                "it left out?)")
    assert list(tmp_path.iterdir()) == [tmp_path / "w"] or list(tmp_path.iterdir()) == []


def test_a_value_given_with_equals_is_taken_as_written(tmp_path):
    r = _run(["deal", "--topology", "2x4x2", "--members=0,1"])
    assert r.exit_code == 0, r.output
    r = _run(["run", "--check-only", "--out=--x", "--help"])
    assert r.exit_code == 0 and " run [OPTIONS]" in r.stdout.splitlines()[0]


# ------------------------------------------------ 24: relative --patches handed to git -C SRC

def test_series_apply_with_a_relative_patches_dir(tmp_path, monkeypatch):
    from fakefreebsd import _git, _series, _tree
    ser = tmp_path / "ser"
    src = ser / "src"
    base = _tree(src)
    _series(ser, src, base)
    monkeypatch.chdir(tmp_path)
    r = _run(["series", "apply", "--src", "ser/src", "--patches", "ser/patches"])
    assert r.exit_code == 0, r.output
    assert _git(src, "log", "-1", "--format=%s") == "kern: Add y"
    assert (src / "sys/kern/kern_y.c").read_text() == "int y;\n"


def test_patch_files_are_absolute(tmp_path, monkeypatch):
    from rxl.tree.patch import patch_files
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "0001-a.patch").write_text("")
    monkeypatch.chdir(tmp_path)
    assert patch_files("p") == [tmp_path / "p" / "0001-a.patch"]


# ------------------------------------------------ 27: the advice each input takes

def test_each_input_is_told_what_it_takes(tmp_path, monkeypatch):
    import os
    os.mkfifo(tmp_path / "fifo")
    monkeypatch.chdir(tmp_path)
    assert error_line(["vm", "--image", "fifo"]) == (
        "Error: Invalid value for '--image': fifo: a FIFO, not a regular file (its open "
        "waits for a writer; give a raw disk image file or a disk device)")
    assert error_line(["vm", "--image", "-"]) == (
        "Error: Invalid value for '--image': -: not read from standard input; give a raw "
        "disk image file or a disk device")
    r = _run(["targets", "--targets", "-"])
    assert (r.exit_code, r.stdout) == (2, "-: a targets file is not read from standard "
                                          "input; give a file or <(...)\n")
    assert error_line(["run", "--check-only", "--target", "b", "--targets", "fifo"]) == (
        "Error: fifo: a FIFO, not a regular file (its open waits for a writer; give a file "
        "or <(...)): not a targets file")
    assert error_line(["parse", "fifo"]).endswith("(its open waits for a writer; give a "
                                                  "file, - or <(...))")
