"""Issue 27's fifteenth pass (/work/coord/nc15.md), faults 3, 4, 7, 8, 13, 14,
15 and 17:

3. ``rxl kcount table`` of a trace whose outer function has no marks said
   "give --mark FUNCTION", and table has no --mark: its words now say the
   table reads the marks of those outer functions only (the commands with
   --mark still say to give it);
4. ``--tunable NAME`` given twice kept the last value without a word (rxl
   learn, rxl kcount setsockopt), and rxl learn took
   ``--tunable dev.igb.0.iflib.core_spread=V``, which it sets itself per
   boot: rxl.learn.request.name_values, the one parser of both commands'
   --tunable (and of --guest-sysctl), refuses both, naming both values;
7. ``rxl learn --groups-every 0`` (or ``-0``) planned "groups view every 0 s"
   ("every -0 s"); 0 is never;
8. ``rxl learn --log - --topology -``: the topology read stdin, the log read
   it empty ("no ==RXL== LEARN line"): ``-`` for an input after an option
   read stdin is refused naming both (rxl.cli.options.check_input);
13-15. an ``--atf-dir`` program was checked less than a ``--test``: its
   content errors named '--test' (not given), a name such as
   ``a;reboot_test`` went into the guest's rc, and ``rxl guest up`` built a
   FIFO, a symlink loop, an empty or a non-UTF-8 source:
   rxl.tree.world.check_atf_dir, one check for rxl run and rxl guest up;
17. ``rxl kcount table --out T`` with ``--trace ... T`` overwrote the trace
   with the table.

Each refusal is one ``Error:`` line, exit 2, nothing made or changed."""

import json
import os
from pathlib import Path

import pytest

from clierror import error_line as _error, files as _files, run as _run, work  # noqa: F401 (work: fixture)
from fakefreebsd import kernel_bytes
from learnargs import learn_args, pristine_kernel, t15  # noqa: F401 (t15: fixture)

ATF = ('#include <atf-c.h>\nATF_TC_WITHOUT_HEAD(t);\nATF_TC_BODY(t, tc) {}\n'
       'ATF_TP_ADD_TCS(tp) { ATF_TP_ADD_TC(tp, t); return atf_no_error(); }\n')


# ------------------------------------------------------ 3: kcount table's words

def _trace(work, outer="f", name="t.json", entries=None):
    doc = {"outer": outer, "entries": entries or {outer: "0xffffffff80000000"},
           "asm": {"0xffffffff80000000": "call", "0xffffffff80000001": "ret"},
           "samples": [{"pc": [0xffffffff80000000, 0xffffffff80000001],
                        "sp": [4096, 4096]}]}
    p = work / name
    p.write_text(json.dumps(doc))
    return p


def test_table_of_an_outer_with_no_mark_says_no_option_it_lacks(work):
    """3: "give --mark FUNCTION"; table --mark is "No such option '--mark'"."""
    t = _trace(work)
    line = _error(["kcount", "table", "--trace", "accept-off", "pristine", t])
    assert line == (
        f"Error: accept-off pristine: {t}: outer f has no default mark (one of "
        "in_pcblookup_mbuf, kern_accept4, tcp_input, syncache_expand); the cost table "
        "reads the marks of those outer functions only (it takes no --mark); record the "
        "trace with one of them as --outer")
    assert _error(["kcount", "table", "--trace", "accept-off", "pristine", t,
                   "--mark", "f"]) == "Error: No such option '--mark'."


def test_the_commands_with_mark_still_say_to_give_it(work):
    t = _trace(work)
    assert _error(["kcount", "analyze", t]).endswith("); give --mark FUNCTION")
    assert _error(["kcount", "sites", t, "--kernel", t]).endswith("); give --mark FUNCTION")


# ------------------------------------------------------ 17: table --out is no --trace

def _accept_trace(work, name="a.json"):
    """A kern_accept4 trace of one accept that entered soaccept (the table reads it)."""
    doc = {"outer": "kern_accept4",
           "entries": {"kern_accept4": "0x100", "soaccept": "0x200"},
           "asm": {"0x100": "push %rbp", "0x101": "call 0x200 <soaccept>",
                   "0x102": "ret", "0x200": "lock xadd %eax,0x30(%rbx)", "0x201": "ret"},
           "samples": [{"pc": [0x100, 0x101, 0x200, 0x201, 0x102],
                        "sp": [100, 100, 92, 92, 100], "cas": []}]}
    p = work / name
    p.write_text(json.dumps(doc))
    return p


def test_table_refuses_an_out_that_is_one_of_its_traces(work):
    """17: exit 0, the trace replaced by the table JSON."""
    t = _accept_trace(work)
    text = t.read_text()
    before = _files(work)
    assert _error(["kcount", "table", "--trace", "accept-off", "pristine", t,
                   "--out", t]) == (
        f"Error: Invalid value for '--out': {t}: one of the --trace inputs: writing it "
        "would replace what is read; write elsewhere")
    other = work / "b.json"
    other.write_text("{}")
    assert _error(["kcount", "table", "--trace", "accept-off", "pristine", t,
                   "--trace", "accept-off", "patched", other, "--out", other]).startswith(
        f"Error: Invalid value for '--out': {other}: one of the --trace inputs")
    other.unlink()
    link = work / "link.json"
    link.symlink_to(t)
    assert _error(["kcount", "table", "--trace", "accept-off", "pristine", link,
                   "--out", t]) == (
        f"Error: Invalid value for '--out': {t}: one of the --trace inputs (as {link}): "
        "writing it would replace what is read; write elsewhere")
    link.unlink()
    hard = work / "hard.json"
    os.link(t, hard)
    assert "one of the --trace inputs" in _error(
        ["kcount", "table", "--trace", "accept-off", "pristine", hard, "--out", t])
    hard.unlink()
    assert t.read_text() == text and _files(work) == before


def test_table_still_writes_an_out_of_its_own(work):
    t = _accept_trace(work)
    out = work / "table.json"
    r = _run(["kcount", "table", "--trace", "accept-off", "pristine", t, "--out", out])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text()) == {
        "accept-off": {"pristine": {"instructions": 5, "locks": 0, "atomics": 1}}}
    r = _run(["kcount", "table", "--trace", "accept-off", "pristine", t,
              "--out", os.devnull])
    assert r.exit_code == 0, r.output


# ------------------------------------------------------ 4: --tunable

def test_learn_refuses_a_tunable_given_twice(t15, kernel_file, work):
    """4: the plan had tunables {'hw.x': '2'}: the first value dropped."""
    args = learn_args(work, t15, kernel_file)
    before = _files(work)
    assert _error(args + ["--tunable", "hw.x=1", "--tunable", "hw.x=2"]) == (
        "Error: --tunable 'hw.x=2': hw.x given twice (hw.x=1, hw.x=2): give each NAME once")
    assert _error(args + ["--tunable", "hw.x=1", "--tunable", "hw.x=1"]).startswith(
        "Error: --tunable 'hw.x=1': hw.x given twice (hw.x=1, hw.x=1)")
    assert _error(args + ["--guest-sysctl", "a.b=1", "--guest-sysctl", "a.b=2"]) == (
        "Error: --guest-sysctl 'a.b=2': a.b given twice (a.b=1, a.b=2): give each NAME once")
    assert _files(work) == before


def test_setsockopt_refuses_a_tunable_given_twice(t15, kernel_file, work):
    """4: the plan said "# loader tunable a.b=2"."""
    args = ["kcount", "setsockopt", "--dry-run", "--kernel", kernel_file, "--src", t15,
            "--objdir", work / "adir", "--out", work / "out" / "s"]
    before = _files(work)
    assert _error(args + ["--tunable", "a.b=1", "--tunable", "a.b=2"]) == (
        "Error: Invalid value for --tunable: --tunable 'a.b=2': a.b given twice (a.b=1, "
        "a.b=2): give each NAME once")
    assert _files(work) == before
    r = _run(args + ["--tunable", "a.b=1", "--tunable", "a.c=2"])
    assert r.exit_code == 0, r.output
    assert "# loader tunable a.b=1" in r.stdout and "# loader tunable a.c=2" in r.stdout


@pytest.mark.parametrize("value", ["1", "0"])
def test_learn_refuses_the_core_spread_it_sets_per_boot(value, t15, kernel_file, work):
    """4: =1 put the patched and pristine boots on the spread order; =0 was
    replaced by 1 on the spread boot without a word."""
    args = learn_args(work, t15, kernel_file)
    before = _files(work)
    assert _error(args + ["--tunable", f"dev.igb.0.iflib.core_spread={value}"]) == (
        f"Error: --tunable 'dev.igb.0.iflib.core_spread={value}': "
        "dev.igb.0.iflib.core_spread is set by the harness itself, per boot (1 on the "
        "spread boot of --config learn-spread, unset on the others: --config chooses the "
        "boots); leave it out")
    assert _error(args + ["--config", "learn-off", "--tunable",
                          f"dev.igb.0.iflib.core_spread={value}"]).startswith(
        f"Error: --tunable 'dev.igb.0.iflib.core_spread={value}': "
        "dev.igb.0.iflib.core_spread is set by the harness itself")
    assert _files(work) == before


def test_learn_still_takes_distinct_tunables_for_every_boot(t15, kernel_file, work):
    r = _run(learn_args(work, t15, kernel_file, "--tunable", "hw.x=1", "--tunable", "hw.y=2",
                    "--tunable", "dev.igb.1.iflib.core_spread=1"))
    assert r.exit_code == 0, r.output
    boots = [ln for ln in r.stdout.splitlines() if ln.startswith("# boot ")]
    assert len(boots) == 3 and all("'hw.x': '1', 'hw.y': '2'" in b for b in boots)
    spread = next(b for b in boots if b.startswith("# boot spread:"))
    assert "'dev.igb.0.iflib.core_spread': '1'" in spread
    assert not any("'dev.igb.0.iflib.core_spread'" in b for b in boots if b != spread)


# ------------------------------------------------------ 7: --groups-every 0

@pytest.mark.parametrize("value, says", [("0", "groups view: never"),
                                         ("-0", "groups view: never"),
                                         ("0.0", "groups view: never"),
                                         ("1", "groups view every 1 s"),
                                         ("0.5", "groups view every 0.5 s")])
def test_learn_plan_says_never_for_groups_every_0(value, says, t15, kernel_file, work):
    """7: "groups view every 0 s" and "every -0 s"; the help says 0 is never."""
    r = _run(learn_args(work, t15, kernel_file, "--groups-every", value))
    assert r.exit_code == 0, r.output
    first = r.stdout.splitlines()[0]
    assert first.endswith(f"; {says}"), first


# ------------------------------------------------------ 8: stdin read once

DATA = Path(__file__).resolve().parents[2] / "data"
LOG = DATA / "learn" / "synthetic-patched.log"
TOPO = DATA / "topology" / "qemu-2s-numa.xml"


def test_learn_refuses_a_log_on_stdin_the_topology_read(work):
    """8: "-: no ==RXL== LEARN line: not a console log of rxl learn": --topology -
    had read stdin, the log read it empty."""
    before = _files(work)
    for args in (["--log", "-", "--topology", "-"], ["--topology", "-", "--log", "-"]):
        r = _run(["learn", *args], input=TOPO.read_text())
        assert r.exit_code == 2 and r.stdout == "", r.output
        assert r.stderr.splitlines() == [
            "Error: Invalid value for '--log': -: standard input is read by --topology - "
            "already (it can be read only once); give a file"]
    assert _files(work) == before


def test_learn_still_reads_one_of_them_on_stdin(work):
    r = _run(["learn", "--log", LOG, "--topology", "-"], input=TOPO.read_text())
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("guest topology: <stdin>")
    r = _run(["learn", "--log", "-"], input=LOG.read_text())
    assert r.exit_code == 0, r.output


def test_learn_ports_refuses_a_log_on_stdin_the_topology_read(work):
    """8, rxl.learn.ports (python -m): its LOG and --topology - likewise."""
    from click.testing import CliRunner
    from rxl.learn import ports
    r = CliRunner().invoke(ports.main, ["-", "--label", "x", "--topology", "-"],
                           input=TOPO.read_text())
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines() == [
        "Error: Invalid value for LOG: -: standard input is read by --topology - "
        "already (it can be read only once); give a file"]


# ------------------------------------------------------ 13-15: --atf-dir's programs

def _atf(work, name, data):
    d = work / "atf"
    d.mkdir(exist_ok=True)
    (d / name).write_bytes(data)
    return d


def _guest_up(work, d):
    k = work / "kernel"
    k.write_bytes(kernel_bytes())
    src = work / "src"
    (src / "sys").mkdir(parents=True, exist_ok=True)
    (src / "tools/build").mkdir(parents=True, exist_ok=True)
    (src / "tools/build/make.py").write_text("")
    return ["guest", "up", "--dry-run", "--build", "--kernel", k, "--src", src,
            "--atf-dir", d]


CONTENT = [(b"", "no ATF_TP_ADD_TCS: not an ATF C test program (it would fail to link "
                 "after the build)"),
           (b"\xff\xfe\n", "not UTF-8 text: not an ATF C test source"),
           (b"ATF_TP_ADD_TCS\0\n", "holds NUL bytes, not text: not an ATF C test source")]


@pytest.mark.parametrize("data, why", CONTENT)
def test_run_names_atf_dir_for_its_programs_content(data, why, work):
    """13: "Invalid value for '--test': a_test=atf2/a_test.c: ...": no --test given."""
    d = _atf(work, "a_test.c", data)
    before = _files(work)
    for mode in ("--check-only", "--dry-run"):
        assert _error(["run", mode, "--atf-dir", d]) == (
            f"Error: Invalid value for '--atf-dir': {d}/a_test.c: {why}")
    assert _files(work) == before


@pytest.mark.parametrize("name", ["a;reboot_test.c", "$(id)_test.c", "my test_test.c",
                                  "caf\xe9_test.c".encode("latin-1").decode(
                                      "utf-8", "surrogateescape"),
                                  "-x_test.c", ".x_test.c"])
def test_atf_dir_program_names_follow_tests_rule(name, work):
    """14: run --check-only / --dry-run and guest up --dry-run planned the
    program 'a;reboot_test', which the guest's rc runs unquoted."""
    d = work / "atf"
    d.mkdir()
    (d / name).write_text(ATF)
    stem = name[:-2]
    shown = stem.encode("utf-8", "surrogateescape").decode("latin-1") \
        if "\udce9" in stem else stem
    shown = shown.replace("\xe9", "\\xe9")
    why = (f"the program name '{shown}' is not a plain file name (letters, digits, '_', "
           "'.', '-'), as --test NAME must be (it goes unquoted into the guest's rc and "
           "the build's commands)")
    before = _files(work)
    for args in (["run", "--check-only", "--atf-dir", d], ["run", "--dry-run", "--atf-dir", d],
                 _guest_up(work, d)):
        line = _error(args)
        assert line.startswith("Error: Invalid value for '--atf-dir': ") and \
            line.endswith(f": {why}"), line
    assert _error(["run", "--check-only", "--atf-dir", "", "--test",
                   f"{stem}={d / name}"]).startswith("Error: Invalid value for '--test': ")


@pytest.mark.parametrize("make, why", [
    ("fifo", "a FIFO, not a regular file (a C source)"),
    ("loop", "a symlink loop, it cannot be resolved"),
    ("dir", "a directory, not a regular file (a C source)"),
    ("empty", CONTENT[0][1]),
    ("latin1", CONTENT[1][1]),
])
def test_guest_up_checks_atf_dir_programs_as_run_does(make, why, work):
    """15: guest up --dry-run --build planned "the ATF programs: compiled ..."
    of a FIFO a_test.c, a symlink loop, an empty and a non-UTF-8 one."""
    d = work / "atf"
    d.mkdir()
    a = d / "a_test.c"
    if make == "fifo":
        os.mkfifo(a)
    elif make == "loop":
        a.symlink_to(d / "b_test.c")
        (d / "b_test.c").symlink_to(a)
    elif make == "dir":
        a.mkdir()
    else:
        a.write_bytes(b"" if make == "empty" else b"caf\xe9\n")
    args = _guest_up(work, d)
    before = _files(work)
    for cmd in (["run", "--check-only", "--atf-dir", d], args):
        line = _error(cmd)
        assert line.startswith(f"Error: Invalid value for '--atf-dir': {a}: {why}"), line
    assert _files(work) == before


def test_the_series_own_atf_dir_still_passes(work):
    d = _atf(work, "mine_test.c", ATF.encode())
    r = _run(["run", "--check-only", "--atf-dir", d])
    assert r.exit_code == 0, r.output
    r = _run(_guest_up(work, d))
    assert r.exit_code == 0, r.output


# ------------------------------------------------------ 19: --programs names

URL = "ssh://root@h.example"


@pytest.mark.parametrize("name", ["a;reboot", "$(id)", "my prog", "-x"])
def test_programs_names_follow_tests_rule_at_check_only(name, work):
    """19: --check-only said "1 program; the target's kernel runs it", and
    --dry-run failed late (exit 1) with "tests: 'a;reboot': not a plain
    program name"."""
    d = work / "progs"
    d.mkdir()
    (d / name).write_text("#!/bin/sh\n")
    (d / name).chmod(0o755)
    before = _files(work)
    for mode in ("--check-only", "--dry-run"):
        assert _error(["run", mode, "--target", URL, "--programs", d]) == (
            f"Error: Invalid value for '--programs': {d / name}: the program name "
            f"'{name}' is not a plain file name (letters, digits, '_', '.', '-'), as --test "
            "NAME must be (it goes unquoted into the target's commands and Kyuafile)")
    assert _files(work) == before


def test_programs_of_plain_names_still_pass(work):
    d = work / "progs"
    d.mkdir()
    (d / "ls_test").write_text("#!/bin/sh\n")
    (d / "ls_test").chmod(0o755)
    r = _run(["run", "--check-only", "--target", URL, "--programs", d])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"--programs {d}: 1 program; the target's kernel runs it")


# ------------------------------------------------------ 22: learn --pcap, a comma

def test_learn_pcap_path_doubles_a_comma_for_qemu(t15, kernel_file, work):
    """22: file=/x/l,o/patched.pcap: QEMU ends the value at the comma and takes
    "o/patched.pcap" for a key (measured, QEMU 7.2: "Invalid parameter"); ",,"
    is its escape of one."""
    out = work / "l,o"
    r = _run(learn_args(work, t15, kernel_file, "--out", out, "--pcap"))
    assert r.exit_code == 0, r.output
    dumps = [w for ln in r.stdout.splitlines() for w in ln.split()
             if w.startswith("filter-dump,")]
    assert len(dumps) == 3, r.stdout
    assert all(f"file={str(out).replace(',', ',,')}/" in w for w in dumps), dumps
    assert f"filter-dump,id=dump0,netdev=net0,file={work}/l,,o/patched.pcap" in dumps


# ------------------------------------------------------ 20: --new-program of --programs

def _progs(work, *names):
    d = work / "progs"
    d.mkdir()
    for n in names:
        (d / n).write_text("#!/bin/sh\n")
        (d / n).chmod(0o755)
    return d


def test_new_program_is_checked_against_the_programs_dir(work):
    """20: with --programs holding only ls_test, --new-program ls_test was "not
    a test program of this run (known: so_reuseport_lb_test,
    so_reuseport_lb_cpu_test)", and --new-program so_reuseport_lb_cpu_test,
    which DIR lacks, was taken."""
    d = _progs(work, "ls_test")
    args = ["run", "--check-only", "--target", URL, "--programs", d]
    r = _run(args + ["--new-program", "ls_test"])
    assert r.exit_code == 0, r.output
    before = _files(work)
    assert _error(args + ["--new-program", "so_reuseport_lb_cpu_test"]) == (
        "Error: Invalid value for '--new-program': so_reuseport_lb_cpu_test: not a test "
        f"program of this run (known: ls_test, the programs of --programs {d})")
    assert _files(work) == before


def test_a_series_program_in_the_programs_dir_is_still_new(work, monkeypatch):
    """The series' own programs a DIR holds stay new (their cases judged), the
    ones it lacks are no program of the run."""
    from rxl.tree.world import check_atf_dir, REPO_ATF_DIR
    from rxl.verify import cli as verify_cli
    series = [n for n, _ in check_atf_dir(str(REPO_ATF_DIR))]
    assert len(series) >= 1
    seen = []
    check = verify_cli.check_request

    def spy(req, **kw):
        seen.append(req.new_programs)
        return check(req, **kw)
    monkeypatch.setattr(verify_cli, "check_request", spy)
    d = _progs(work, "ls_test", series[0])
    r = _run(["run", "--check-only", "--target", URL, "--programs", d,
              "--new-program", "ls_test"])
    assert r.exit_code == 0, r.output
    assert seen == [("ls_test", series[0])]
    assert _error(["run", "--check-only", "--target", URL, "--programs", d,
                   "--new-program", "so_reuseport_lb_test"]).startswith(
        "Error: Invalid value for '--new-program': so_reuseport_lb_test: FreeBSD's own")


# ------------------------------------------------------ 21: a comma in a guest's paths

def test_qemu_options_double_a_comma_of_a_path():
    """21: "root_dir may not contain a comma" (an internal name, a path the user
    never typed) refused --out o,ut, --guest-dir g,d and RXL_WORK=w,k: QEMU
    takes a path with a comma once it is doubled (fat:/a,,b serves /a,b;
    measured with qemu-system-x86_64 -machine none)."""
    from rxl.guest.qemu import GuestConfig, build_argv, opt_value
    assert opt_value("/a,b,,c") == "/a,,b,,,,c"
    argv = build_argv(GuestConfig(root_dir="/g/o,ut/patched"), firmware="/fw/O,VMF.fd")
    assert "if=none,id=root,format=raw,file=fat:/g/o,,ut/patched,snapshot=on" in argv
    assert "if=pflash,format=raw,readonly=on,file=/fw/O,,VMF.fd" in argv


def test_a_comma_in_an_out_or_guest_dir_or_work_root_is_planned(t15, kernel_file, work,
                                                                 monkeypatch):
    """21, each command that boots: run, learn, kcount setsockopt, guest up."""
    def fat(r):
        assert r.exit_code == 0, r.output
        return sorted({w.split("file=fat:")[1] for w in r.stdout.split() if "file=fat:" in w})
    other = pristine_kernel(work)
    r = _run(["run", "--check-only", "--out", work / "o,ut"])
    assert r.exit_code == 0, r.output
    got = fat(_run(["run", "--dry-run", "--kernel", kernel_file, "--pristine-kernel", other,
                    "--out", work / "o,ut", "--guest-dir", work / "g,d"]))
    assert got and all(g.startswith(f"{work}/g,,d/o,,ut/") for g in got), got
    args = learn_args(work, t15, kernel_file)
    args[args.index("--guest-dir") + 1] = work / "l,g"
    got = fat(_run(args))
    assert got == [f"{work}/l,,g/{b},snapshot=on" for b in ("patched", "pristine", "spread")]
    got = fat(_run(["kcount", "setsockopt", "--dry-run", "--kernel", kernel_file, "--src", t15,
                    "--objdir", work / "adir", "--out", work / "k,s"]))
    assert got == [f"{work}/k,,s/root,snapshot=on"], got
    monkeypatch.setenv("RXL_WORK", str(work / "w,k"))
    r = _run(_guest_up(work, ""))
    got = fat(r)
    assert got == [f"{work}/w,,k/guest/up/root,snapshot=on"], got
    for p in ("o,ut", "g,d", "l,g", "k,s", "w,k"):
        assert not (work / p).exists()


# ------------------------------------------------------ 23: a shape's memory vs the host

HUGE = ("shapes:\n  s: {sockets: 1, dies: 1, cores: 1, threads: 1, numa_nodes: 1, "
        "memory_mib: 100000000, nic: igb}\ntargets:\n  %s: {kind: qemu, shape: s}\n")


def test_a_target_shape_larger_than_the_host_is_refused_naming_it(t15, kernel_file, work):
    """23: run --check-only / --dry-run --target huge planned -m 100000000M (exit
    0), and learn refused it as "Invalid value for '--memory'", not given."""
    f = work / "t.yaml"
    f.write_text(HUGE % "huge")
    why = ("Error: Invalid value for '--target': huge: its shape's memory_mib 100000000 MiB "
           "is more than this host's ")
    args = learn_args(work, t15, kernel_file)
    before = _files(work)
    for cmd in (["run", "--check-only", "--target", "huge", "--targets", f],
                ["run", "--dry-run", "--target", "huge", "--targets", f],
                args + ["--target", "huge", "--targets", f]):
        line = _error(cmd)
        assert line.startswith(why) and line.endswith(" MiB of RAM (QEMU cannot allocate it)"), line
    assert _files(work) == before
    r = _run(args + ["--target", "huge", "--targets", f, "--memory", "1024"])
    assert r.exit_code == 0, r.output  # learn's --memory replaces the shape's


def test_the_default_guest_of_the_targets_file_is_checked_too(work):
    (work / "w").mkdir()
    (work / "w" / "targets.yaml").write_text(HUGE % "guest")
    line = _error(["run", "--check-only"])
    assert line.startswith(f"Error: {work}/w/targets.yaml: guest: its shape's memory_mib "
                           "100000000 MiB is more than this host's "), line
