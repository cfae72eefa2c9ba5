"""Issue 27's third pass: the faults the second left ("Not fixed, and why" in
docs/results/newcomer.md) and those helper tries27c found, each fixed by root.

Every bad input is exit 2, one ``Error:`` line naming the option (``Invalid
value for '--OPTION'``), no traceback, nothing made.
"""

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.learn import plan
from fakefreebsd import version_files
from clierror import error_line as _error_line

DATA = Path(__file__).resolve().parents[2] / "data"
LOG = DATA / "learn" / "synthetic-patched.log"


def _run(args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


def one_error(r, option, *words):
    """The result's one Error line, which names ``option`` and says ``words``."""
    errors = [ln for ln in r.output.splitlines() if ln.startswith("Error:")]
    assert r.exit_code == 2 and len(errors) == 1, r.output
    assert "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert f"Invalid value for '{option}'" in errors[0], errors[0]
    for w in words:
        assert w in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    return tmp_path


@pytest.fixture
def learn(work):
    """``rxl learn --dry-run`` of a tree with the series' option, a config that
    boots the patched kernel only, and a sysctl: what is left to refuse is the
    option under test."""
    src = work / "src"
    (src / "sys/netinet").mkdir(parents=True)
    (src / "sys/netinet/tcp.h").write_text("#define\tTCP_REUSPORT_LB_CPU\t1027\n")
    version_files(src, major=15)  # a tree that says its release
    return ["learn", "--src", src, "--objdir", work / "o", "--guest-dir", work / "g",
            "--out", work / "out", "--dry-run", "--learn-sysctl", "a.b",
            "--config", "learn-on"]


# ------------------------------------------------ learn --kernel, --pristine-kernel

@pytest.mark.parametrize("option", ["--kernel", "--pristine-kernel"])
@pytest.mark.parametrize("make,why", [
    (None, "no such kernel"),
    (lambda p: p.mkdir(), "not a regular file"),
    (lambda p: p.write_bytes(b""), "an empty file"),
])
def test_learn_checks_a_kernel_as_run_does(learn, work, option, make, why):
    """learn --dry-run planned a boot of an absent kernel; it now makes the one
    check rxl run and guest up make (rxl.tree.build.check_kernel_file)."""
    k = work / "kernel-under-test"
    if make:
        make(k)
    cfg = ["--config", "pristine"] if option == "--pristine-kernel" else []
    one_error(_run(learn + cfg + [option, k]), option, why)
    assert not (work / "out").exists() and not (work / "g").exists()


def test_learn_refuses_a_kernel_no_run_boots(learn, kernel_file):
    """--config learn-on boots only the patched kernel: --pristine-kernel was
    silently unused."""
    one_error(_run(learn + ["--pristine-kernel", kernel_file]), "--pristine-kernel",
              "no run boots the pristine kernel", "learn-on")
    r = _run(learn + ["--kernel", kernel_file])
    assert r.exit_code == 0, r.output
    assert f"# kernel patched: {kernel_file} (given)" in r.stdout


# ------------------------------------------------------------ learn --smp

@pytest.mark.parametrize("value,why", [
    ("0,1,1", "SOCKETS 0"), ("2,0,2", "CORES 0"), ("2,2", "expected SOCKETS,CORES,THREADS"),
    ("2,2,x", "expected SOCKETS,CORES,THREADS"), ("1,1,300", "at most 288"),
    ("", "an empty value"),
])
def test_learn_smp_is_refused_naming_smp(learn, kernel_file, value, why):
    """--smp 0,1,1 said "guest (0 vCPUs, --memory 2048): sockets must be ...",
    naming --memory."""
    line = one_error(_run(learn + ["--kernel", kernel_file, "--smp", value]), "--smp", why)
    assert "--memory" not in line


# ------------------------------------------------------------ learn --log

def test_learn_log_given_twice_or_two_logs_of_one_run_are_refused(work):
    """--log L --log L printed every run twice; two copies of one log merged
    their runs by label (one hid the other)."""
    one_error(_run(["learn", "--log", LOG, "--log", LOG]), "--log", "given twice")
    link = work / "link.log"
    link.symlink_to(LOG)
    one_error(_run(["learn", "--log", LOG, "--log", link]), "--log", "given twice")
    copy = work / "copy.log"
    copy.write_bytes(LOG.read_bytes())
    one_error(_run(["learn", "--log", LOG, "--log", copy]), "--log",
              "run learn-off.rxq is in", "too")


# ------------------------------------------------------------ learn --topology

@pytest.mark.parametrize("topo,cpu", [("1x1x1", "no CPU 1"), ("1x2x1", "no CPU 2")])
def test_learn_topology_lacking_the_logs_cpus_is_refused(topo, cpu):
    """A topology without the log's CPUs gave classes 'never' and no
    predictions, exit 0."""
    one_error(_run(["learn", "--log", LOG, "--topology", topo]), "--topology", cpu)
    assert _run(["learn", "--log", LOG, "--topology", "qemu-2s"]).exit_code == 0


def test_a_log_whose_own_topology_lacks_its_cpus_is_an_error(work):
    """No topology in the log: qemu-2s (CPUs 0-7) is taken; an rx queue on CPU 9
    was shown with no distance and no error."""
    lines = LOG.read_text().splitlines()
    lines = lines[:3] + lines[lines.index("==RXL== TOPOLOGY END") + 1:]
    log = work / "cpu9.log"
    log.write_text("\n".join(lines).replace("rxq1.cpu: 2", "rxq1.cpu: 9") + "\n")
    # exit 2, as the same mismatch under --topology (issue 27, tenth pass, 6)
    assert _error_line(["learn", "--log", log]) == (
        f"Error: {log}: the topology qemu-2s has no CPU 9 (rx queue 1's CPU): give the "
        "guest's with --topology")


@pytest.mark.parametrize("value", ["bogus", "/nonexistent/t.xml", ""])
def test_learn_topology_that_is_none_names_the_option(value):
    one_error(_run(["learn", "--log", LOG, "--topology", value]), "--topology")


# ------------------------------------------------------------ learn --lb-cpu-opt

@pytest.mark.parametrize("value,why", [
    ("-1", "from 1 to 2147483647"), ("0", "from 1 to 2147483647"),
    ("2147483648", "from 1 to 2147483647"), ("0o7", "not an integer"),
    ("1_027", "not an integer"), ("x", "not an integer"),
])
def test_learn_lb_cpu_opt_is_a_socket_option_number(learn, kernel_file, value, why):
    """setsockopt(2)'s optname is an int; -1 was compiled into learnd as
    -DLEARND_LB_CPU_OPT=-0x1."""
    one_error(_run(learn + ["--kernel", kernel_file, "--lb-cpu-opt", value]),
              "--lb-cpu-opt", why)


@pytest.mark.parametrize("value,hexa", [("1027", "0x403"), ("0x1030", "0x1030"),
                                        ("010", "0x8")])
def test_learn_lb_cpu_opt_reads_c_syntax(learn, kernel_file, value, hexa):
    r = _run(learn + ["--kernel", kernel_file, "--lb-cpu-opt", value])
    assert r.exit_code == 0, r.output
    assert f"-DLEARND_LB_CPU_OPT={hexa}" in r.stdout


# ------------------------------------------------------------ learn --concurrency

def test_learn_concurrency_is_bounded_by_learnds_backlog(learn, kernel_file):
    """--concurrency 100000 was planned: 100,000 host threads against a
    listen(2) backlog of 1024."""
    src = (Path(plan.__file__).with_name("learnd.c")).read_text()
    (backlog,) = re.findall(r"listen\(fd, (\d+)\)", src)
    assert plan.LISTEN_BACKLOG == int(backlog) == 1024
    one_error(_run(learn + ["--kernel", kernel_file, "--concurrency", "100000"]),
              "--concurrency", "at most 1024", "listen(2) backlog")
    one_error(_run(learn + ["--kernel", kernel_file, "--concurrency", "1025"]),
              "--concurrency", "at most 1024")
    assert _run(learn + ["--kernel", kernel_file, "--concurrency", "1024"]).exit_code == 0


# ------------------------------------------------ kcount setsockopt (the second pass left)

@pytest.fixture
def setsockopt(work, kernel_file):
    (work / "src").mkdir()
    (work / "obj").mkdir()
    return ["kcount", "setsockopt", "--kernel", kernel_file, "--src", work / "src",
            "--objdir", work / "obj", "--dry-run"]


@pytest.mark.parametrize("args,option,words", [
    (["--untagged"], "--untagged", ["give --calls 0, not 1000000"]),
    (["--untagged", "--calls", "0", "--change"], "--untagged", ["--change"]),
    (["--calls", "0", "--change"], "--change", ["--calls 0 makes none"]),
    (["--calls", "5", "--blocks", "6"], "--blocks", ["min(--rounds, --calls) = 5"]),
])
def test_setsockopt_names_both_options_of_a_combination_it_refuses(setsockopt, work, args,
                                                                    option, words):
    """--untagged said "untagged members: creation only (calls 0, no change)",
    naming no option; --calls 0 --change planned a change of nothing."""
    one_error(_run(setsockopt + ["--out", work / "out"] + args), option, *words)
    assert not (work / "out").exists()


@pytest.mark.parametrize("under", [False, True])
def test_setsockopt_out_that_is_a_file_is_refused(setsockopt, work, under):
    """--out FILE printed the plan of a binary at FILE/lbsetsock."""
    f = work / "file"
    f.write_text("x")
    one_error(_run(setsockopt + ["--calls", "0", "--out", f / "x" if under else f]),
              "--out", "is a file" if under else "a file, not a directory")


# ------------------------------------------------ --topology: one option type

@pytest.mark.parametrize("args", [
    ["bench", "accept", "--dry-run", "--setup", "ebpf-deal", "--topology", "bogus"],
    ["deal", "--topology", "bogus", "--members", "0"],
    ["spread", "--topology", "bogus", "--intr-cpus", "0", "--queues", "1"],
    ["outcomes", "--topology", "bogus", "--workers", "0", "--rx-cpus", "0"],
    ["learn", "--log", str(LOG), "--topology", "bogus"],
])
def test_every_topology_option_names_itself(args, work):
    """bench accept --topology bogus (and deal's, spread's, outcomes') said
    "unknown topology 'bogus'", naming no option."""
    one_error(_run(args), "--topology", "unknown topology 'bogus'")


def test_bench_accept_reads_a_topology_from_stdin_once(work, monkeypatch):
    """--topology - was read twice (checked, then dealt): the second read found
    stdin empty."""
    from rxl.bench import ebpf
    monkeypatch.setattr(ebpf, "host_ncpu", lambda: 2)
    text = (DATA / "topology" / "qemu-2s-numa.xml").read_text()
    r = _run(["bench", "accept", "--dry-run", "--setup", "ebpf-deal", "--workers", "2",
              "--topology", "-", "--build-dir", work / "b"], input=text)
    assert r.exit_code == 0, r.output
    assert sum(" -m ebpf " in ln for ln in r.stdout.splitlines()) >= 1


# ------------------------------------------------ tries27c F2: an option given twice

def _single_valued(cmd):
    return [p for p in cmd.params if isinstance(p, click.Option) and not p.multiple
            and not p.count and not p.is_eager]


def _commands(group=None, path=()):
    group = group or main
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + (name,))
        else:
            yield path + (name,), cmd


TWICE = [(path, p) for path, cmd in _commands() for p in _single_valued(cmd)]


@pytest.mark.parametrize("path,param", TWICE,
                         ids=[f"{' '.join(a)} {max(p.opts, key=len)}" for a, p in TWICE])
def test_an_option_given_twice_is_refused_by_every_command(path, param, work):
    """deal --members 0 --members 1 dealt 1: click keeps the last value without
    a word. Every single-valued option of every command refuses a second."""
    opt = max(param.opts, key=len)
    once = [opt] + ([] if param.is_flag else ["x"] * max(param.nargs, 1))
    one_error(_run(list(path) + once + once), opt, "given twice")


def test_a_flag_and_its_off_side_are_one_option(work):
    one_error(_run(["bench", "accept", "--dry-run", "--pin", "--no-pin"]), "--pin",
              "--pin/--no-pin given twice")


def test_a_repeatable_option_still_repeats(work):
    r = _run(["outcomes", "--topology", "2x4x2", "--workers", "0-3", "--rx-cpus", "0",
              "--policy", "hash", "--policy", "deal"])
    assert r.exit_code == 0, r.output


# ------------------------------------------------ tries27c F3, F4: outcomes

def test_outcomes_says_a_cpu_the_counts_leave_out_receives_none():
    """--rx-counts 0:1 with --rx-cpus 0,2: CPU 2 gets 0, which the help did not say."""
    from rxl.decide.cli import outcomes_cmd
    help_ = next(p.help for p in outcomes_cmd.params if p.name == "rx_counts")
    assert "leaves out receives none" in help_


def test_outcomes_refuses_a_policy_given_twice():
    """--policy hash --policy hash printed the hash row twice."""
    one_error(_run(["outcomes", "--topology", "2x4x2", "--workers", "0-15", "--rx-cpus",
                    "0,2", "--policy", "hash", "--policy", "hash"]), "--policy",
              "hash given twice")


# ------------------------------------------------ tries27c F5: stdin closed

@pytest.mark.parametrize("args", [
    ["parse", "-"], ["inspect", "-"], ["kcount", "analyze", "-"], ["learn", "--log", "-"],
    ["deal", "--topology", "-", "--members", "0"],
    ["spread", "--topology", "-", "--intr-cpus", "0", "--queues", "1"],
])
def test_a_read_of_a_closed_stdin_is_one_line(args, work):
    """rxl parse - <&- was an AttributeError traceback (sys.stdin is None)."""
    import os
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "rxl", *args], capture_output=True, text=True,
                       timeout=60, preexec_fn=lambda: os.close(0),
                       env={**os.environ, "RXL_WORK": str(work / "w")})
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.splitlines()[-1].endswith("stdin is closed (<&-): nothing to read "
                                              "for '-'"), p.stderr
    assert len(p.stderr.splitlines()) == 1, p.stderr


# ------------------------------------------------ tries27c F6: a SYSCTL line without a value

def test_a_sysctl_line_that_is_not_name_value_is_a_note():
    """==RXL== SYSCTL net.isr.dispatch was read as the sysctl with value ''."""
    from rxl.verify import parse
    lines = ["==RXL== BEGIN patched", "==RXL== SYSCTL net.isr.dispatch",
             "==RXL== SYSCTL : 3", "==RXL== SYSCTL a b: 1", "==RXL== SYSCTL kern.x: ",
             "==RXL== SYSCTL dev.igb.0.%desc: Intel", "==RXL== END patched"]
    r = parse.parse_console(lines)
    assert r.sysctls == {"kern.x": "", "dev.igb.0.%desc": "Intel"}
    notes = [n for n in r.notes if "malformed SYSCTL line" in n]
    assert [n.split(":")[0] for n in notes] == ["line 2", "line 3", "line 4"]


# ------------------------------------------------ tries27c F7, F8: targets files

@pytest.mark.parametrize("entry,says", [
    ("box: {kind: box, host: 12345}",
     "targets.box.host: 12345 (YAML reads a number: quote it, '12345', for text)"),
    ("box: {kind: box, host: 2026-12-02}", "2026-12-02 (YAML reads a date"),
    ("yes: {kind: box, host: h}", "targets: yes (YAML reads a boolean"),
    ("box: {kind: box, host: h, port: true}",
     "targets.box.port: must be an integer in 1..65535, got true (YAML reads a boolean)"),
    ("box: {kind: !!binary aGVsbG8=, host: h}", "aGVsbG8= (YAML reads bytes"),
    ("g: {kind: qemu, cores: yes}", "targets.g.cores: must be an integer >= 1, got yes "
                                    "(YAML reads a boolean)"),
])
def test_a_targets_value_yaml_typed_is_named_as_written(work, entry, says):
    """host: 12345 said "no host given"; yes: was shown as True, port: true as
    True, !!binary as b'hello'."""
    f = work / "t.yaml"
    f.write_text(f"targets:\n  {entry}\n")
    r = _run(["targets", "--targets", f])
    assert r.exit_code == 2 and says in r.output, r.output
    assert "no host given" not in r.output and "True" not in r.output


def test_a_fully_qualified_host_name_may_end_in_a_dot(work):
    """host: 'localhost.' was refused by a rule its message said it met."""
    from rxl.guest import ssh
    assert ssh.check_host("localhost.") == "localhost."
    assert ssh.check_host("box.example.org.") == "box.example.org."
    for bad in (".", "a..", "-a.", "a.1."):
        with pytest.raises(ssh.TargetError, match="one '.' may end it"):
            ssh.check_host(bad)


# ------------------------------------------------ tries27c F1: the series is four commits

def test_the_words_count_four_commits():
    """series said "three-commit", learn "Commit 3's learning sysctl" (learning
    is commit 4: patches/0004-tcp-Learn-...), the README "all three commits"."""
    root = Path(__file__).resolve().parents[3]
    patches = sorted(p.name for p in (root / "patches").glob("000*.patch"))
    assert len(patches) == 4 and patches[3].startswith("0004-tcp-Learn")
    assert "four-commit" in _run(["series", "--help"]).output
    assert "Commit 4's learning sysctl" in " ".join(_run(["learn", "--help"]).output.split())
    readme = (root / "README.md").read_text()
    assert "all three commits" not in readme and "all four commits" in readme
    assert "commits 2 to 4" in _run(["vm", "--help"]).output


# ------------------------------------------------ tries27c F9, F11, F12: run's checks

SSH = ["run", "--check-only", "--target", "ssh://root@h.example.org"]


@pytest.mark.parametrize("workdir,says", [
    ("//tmp/x", "give it as /tmp/x"),
    ("/tmp/../etc", "below /tmp or /var/tmp (the undo is rm -rf /etc)"),
    ("/var/tmp/rxl/.ssh", "no name in it may start with '.' (.ssh"),
    ("/tmp/a/./b", "give it as /tmp/a/b"),
])
def test_a_workdir_refusal_says_the_rule_broken(work, workdir, says):
    """//tmp/x was told "give it as //tmp/x", /var/tmp/rxl/.ssh "below /tmp or
    /var/tmp" (it is), /tmp/../etc "give it as /etc" (refused next)."""
    one_error(_run(SSH + ["--workdir", workdir]), "--workdir", says)


def test_check_only_refuses_dry_run(work):
    """--check-only --dry-run printed the check only: --dry-run was dropped."""
    one_error(_run(["run", "--check-only", "--dry-run"]), "--dry-run", "--check-only")


@pytest.mark.parametrize("url,says", [
    ("-oProxyCommand=x:path", "starts with '-'"),
    ("ssh://-oProxyCommand=x/r", "starts with '-'"),
    ("ext::sh -c touch% /tmp/x", "blank or control"),
    ("ext::sh%20-c", "TRANSPORT::ADDRESS"),
    ("https://exa mple.org/x", "blank or control"),
])
def test_a_base_url_git_would_run_or_misread_is_refused(work, url, says):
    """All passed the check ("will be fetched from ..."): an ssh option as a
    host, git's ext:: command transport, a blank in a host."""
    one_error(_run(["run", "--check-only", "--base-url", url]), "--base-url", says)


# ------------------------------------------------ tries27c F13, F14: learn's rc and directories

@pytest.mark.parametrize("args,option", [
    (["--learn-sysctl", "net.inet;reboot"], "--learn-sysctl"),
    (["--learn-sysctl", "a b"], "--learn-sysctl"),
    (["--guest-sysctl", "a=1;reboot"], "--guest-sysctl"),
    (["--guest-sysctl", "a;b=1"], "--guest-sysctl"),
    (["--tunable", "hw.x=$(reboot)"], "--tunable"),
])
def test_learn_refuses_what_the_guest_rc_would_run(learn, kernel_file, args, option):
    """--guest-sysctl 'a=1;reboot' went unquoted into the guest's rc (sysctl
    a=1;reboot): the dry run passed it."""
    r = _run(learn + ["--kernel", kernel_file] + args)
    errors = [ln for ln in r.output.splitlines() if ln.startswith("Error:")]
    assert r.exit_code == 2 and len(errors) == 1 and option in errors[0], r.output


@pytest.mark.parametrize("option", ["--guest-dir", "--objdir"])
def test_learn_refuses_a_directory_that_is_a_file(learn, work, kernel_file, option):
    f = work / "file"
    f.write_text("x")
    args = list(learn)
    args[args.index(option) + 1] = f
    one_error(_run(args + ["--kernel", kernel_file]), option, "a file, not a directory")


# ------------------------------------------------ tries27c F15, F18: bench

def test_bench_serial_server_names_the_setups_it_cannot_run(work):
    """--server serial alone said "setup et needs --server loop": no setup was named."""
    line = one_error(_run(["bench", "accept", "--dry-run", "--server", "serial"]),
                     "--server", "the default setups", "no --setup given")
    assert "et" in line
    one_error(_run(["bench", "accept", "--dry-run", "--server", "serial", "--setup",
                    "handoff-rr"]), "--server", "--setup handoff-rr")
    r = _run(["bench", "accept", "--dry-run", "--server", "serial", "--setup", "noflag",
              "--build-dir", work / "b"])
    assert r.exit_code == 0, r.output


def test_setsockopt_objdir_that_is_a_file_says_so(setsockopt, work):
    f = work / "file"
    f.write_text("x")
    args = [a if a != work / "obj" else f for a in setsockopt]
    one_error(_run(args + ["--calls", "0", "--out", work / "o"]), "--objdir",
              "a file, not a directory")


# ------------------------------------------------ tries27c F16, F17: kcount traces

GOOD = {"outer": "f", "entries": {"f": "0x100"},
        "samples": [{"pc": [256], "sp": [4096]}]}


def _trace(work, doc, prefix=b""):
    import json
    p = work / "t.json"
    p.write_bytes(prefix + (json.dumps(doc) if not isinstance(doc, str) else doc).encode())
    return p


@pytest.mark.parametrize("doc,says", [
    ('{"outer": "f", "entries": {"f": "0x100"}, "samples": [{"pc": [1' + "0" * 5000
     + '], "sp": [1]}]}', "'pc' must be a list of integers from 0 to 2**64-1"),
    ({**GOOD, "entries": {"f": "256"}}, "256 is not a hex address"),
    ({**GOOD, "entries": {"f": "0X100"}}, "0X100 is not a hex address"),
    ({**GOOD, "extra": 1}, "extra is no key record writes"),
    ({**GOOD, "samples": [{"pc": [256], "sp": [1], "zz": 1}]}, "sample 1: zz is no key"),
])
def test_a_trace_is_read_as_record_writes_it(work, doc, says):
    """A 5000-digit pc said "not JSON (not JSON)"; "256" was read as 0x256;
    unknown keys were ignored."""
    r = _run(["kcount", "analyze", _trace(work, doc)])
    errors = [ln for ln in r.output.splitlines() if ln.startswith("Error:")]
    assert r.exit_code == 2 and len(errors) == 1 and says in errors[0], r.output
    assert "not JSON (not JSON)" not in r.output


def test_a_trace_with_a_byte_order_mark_is_read(work):
    r = _run(["kcount", "analyze", _trace(work, GOOD, prefix="\ufeff".encode())])
    assert "BOM" not in r.output and "not JSON" not in r.output, r.output


# ------------------------------------------------ tries27c F19, F20, F22: rxl vm

def test_vm_image_that_is_a_fifo_or_a_device(work):
    """A FIFO was "0 bytes, less than one sector"; a disk device (bhyve's zvol)
    has st_size 0 and was refused the same way."""
    import os
    fifo = work / "fifo"
    os.mkfifo(fifo)
    # the one input-kind check says it first (issue 27: a named FIFO's open waits)
    one_error(_run(["vm", "--image", fifo]), "--image", "a FIFO, not a regular file")
    r = _run(["vm", "--image", "/dev/zero"])
    assert "less than one" not in r.output, r.output


def test_vm_tap_longer_than_an_interface_name(work):
    img = work / "img"
    img.write_bytes(b"\0" * 512)
    one_error(_run(["vm", "--image", img, "--tap", "tap" + "9" * 20]), "--tap",
              "at most 15 (IFNAMSIZ")
    assert _run(["vm", "--image", img, "--tap", "tap" + "9" * 12]).exit_code == 0


def test_the_bhyve_image_is_a_15_image():
    """The SSH way refuses a 14 target: the README and vm's help named a 14 image."""
    root = Path(__file__).resolve().parents[3]
    readme = (root / "README.md").read_text()
    assert "FreeBSD-14.x" not in readme and "FreeBSD-15.x-amd64.raw" in readme
    assert "FreeBSD-15.x-RELEASE" in _run(["vm", "--help"]).output


# ------------------------------------------------ tries27c F26: python -m rxl.learn.ports

@pytest.mark.parametrize("args,code,says", [
    (["/nonexistent.log", "--label", "x"], 2, "no such file"),
    ([str(LOG)], 2, "Missing option '--label'"),
    ([str(Path(__file__)), "--label", "x"], 2, "not a console log of rxl learn"),
    ([str(LOG), "--label", "nosuch"], 2, "Invalid value for '--label'"),
    ([str(LOG), "--label", "learn-on.rxq"], 2, "no LEARN K lines"),
])
def test_ports_errors_are_one_line(args, code, says):
    """It printed click's usage block (four lines), and exit 1 for a file that
    is no console log or a label it lacks."""
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "rxl.learn.ports", *args], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == code and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    (line,) = p.stderr.splitlines()
    assert line.startswith("Error: ") and says in line, line


# ------------------------------------------------ tries27c F27: run --atf-dir, --test

def test_atf_dir_mistakes_name_atf_dir(work):
    """A directory x_test.c in --atf-dir was "'--test': ... no such file"."""
    d = work / "atf"
    (d / "x_test.c").mkdir(parents=True)
    one_error(_run(["run", "--check-only", "--atf-dir", d]), "--atf-dir",
              "not a regular file")
    d2 = work / "atf2"
    d2.mkdir()
    (d2 / "so_reuseport_lb_test.c").write_text("int main(void) { return 0; }\n")
    one_error(_run(["run", "--check-only", "--atf-dir", d2]), "--atf-dir",
              "FreeBSD's own program so_reuseport_lb_test")
    one_error(_run(["run", "--check-only", "--test", "foo_test=/dev/null"]), "--test",
              "not a regular file")


# ------------------------------------------------ tries27c F28, F29: rxl parse

def test_parse_help_says_an_end_marker_alone_is_a_crashed_run():
    """The help said exit 2 for a log with no BEGIN and no panic; a log of one
    END line was exit 1 (a crashed run, as tests/unit/verify/test_faults.py
    decides): the help now says so."""
    text = " ".join(_run(["parse", "--help"]).output.split())
    assert "an END but no BEGIN is a run that crashed" in text
    assert "no ==RXL== BEGIN or END line" in text


def test_kernel_words_cover_every_pattern_the_reader_looks_for():
    """parse tested eight patterns on every console line (a 54 MiB log: 9.6 s);
    a line holding none of KERNEL_WORDS is skipped, so each pattern must hold one."""
    from rxl.guest import protocol
    from rxl.verify import parse
    pats = (*protocol.PANIC_PATTERNS, *protocol.WITNESS_PATTERNS, *protocol.REBOOT_PATTERNS,
            protocol.LOR_PAIR)
    for p in pats:
        assert any(w in p.pattern.replace("\\", "") for w in parse.KERNEL_WORDS), p.pattern
    samples = ["panic: page fault", "Fatal trap 12: page fault while in kernel mode",
               "KDB: enter: panic", "lock order reversal:", "acquiring duplicate lock of "
               "same type: \"x\"", "with the following non-sleepable locks held:",
               "Rebooting...", "Copyright (c) 1992-2025 The FreeBSD Project."]
    for s in samples:
        r = parse.parse_console(["==RXL== BEGIN patched", s, "==RXL== END patched"])
        assert r.panic_lines or r.witness_lines or r.reboot_lines or "Copyright" in s \
            or "Rebooting" in s, s


def test_a_log_at_the_cap_parses_in_seconds(tmp_path):
    """64 MiB of console noise (the read cap): CPU time well under 10 s."""
    import time
    from rxl.verify import parse
    noise = ["em0: link state changed to UP", "Timecounters tick every 1.000 msec",
             "da0 at umass-sim0 bus 0 scbus0 target 0 lun 0 " + "x" * 30] * 250_000
    lines = ["==RXL== BEGIN patched", *noise, "==RXL== END patched"]
    assert sum(len(x) + 1 for x in lines) > 30 << 20
    t = time.process_time()
    r = parse.parse_runs(lines)
    spent = time.process_time() - t
    assert r[0].label == "patched" and spent < 5.0, spent


def test_learn_dry_run_names_the_commit_of_each_missing_part(learn, kernel_file, work):
    """'TCP_REUSPORT_LB_CPU absent (commit 2 missing)': it is commit 3's."""
    (work / "src/sys/netinet/tcp.h").write_text("/* none */\n")
    r = _run(learn + ["--kernel", kernel_file])
    assert r.exit_code == 0, r.output
    assert "TCP_REUSPORT_LB_CPU absent (commit 3 missing)" in r.stdout


# ------------------------------------------------ tries27c F23: build --lock

@pytest.mark.parametrize("where,says", [("nosuchdir/x.lock", "does not exist"),
                                        (".", "a directory, not a lock file")])
def test_a_lock_flock_cannot_make_is_refused(work, where, says):
    """build --dry-run --lock DIR/MISSING/x.lock printed flock lines that fail."""
    src = work / "src"
    (src / "tools/build").mkdir(parents=True)
    (src / "tools/build/make.py").write_text("")
    version_files(src)
    one_error(_run(["build", "--dry-run", "--src", src, "--lock", work / where]), "--lock",
              says)
    r = _run(["build", "--dry-run", "--src", src, "--lock", work / "x.lock"])
    assert r.exit_code == 0 and f"flock {work / 'x.lock'} " in r.stdout, r.output
