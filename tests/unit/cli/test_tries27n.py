"""Issue 27's twelfth pass (docs/results/newcomer.md, "Twelfth pass"): the
faults of /work/coord/nc12.md, each at its root. (A) the parsers that guessed:
``rxl learn --log`` merged two runs of one label, reported a run whose learnd
exited non-zero, that had no END, an unreadable DONE value, a pin list that
did not match workers= or a C line that contradicted its W line as if it were
whole, and let the last of a key given twice win; targets.yaml took YAML 1.1's
octal, sexagesimal, binary and underscored integers and an unknown ``~user``
as a relative path."""

from pathlib import Path

import pytest

from clierror import error_line as _error, run as _run, work  # noqa: F401 (work: fixture)
from rxl.learn import results as R
from rxl.learn.metrics import analyze_log

DATA = Path(__file__).resolve().parents[2] / "data"
PATCHED = DATA / "learn" / "synthetic-patched.log"


def _log(tmp_path, edit, name="x.log"):
    """synthetic-patched.log with ``edit(lines)`` applied; its path."""
    lines = PATCHED.read_text().splitlines()
    edit(lines)
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def _at(lines, text):
    """Index of the one line equal to ``text``."""
    (i,) = [i for i, line in enumerate(lines) if line == text]
    return i


# ------------------------------------------ 1: two runs of one label

def test_two_learn_runs_of_one_label_are_refused_naming_the_second_begin(tmp_path):
    """1: the run learn-on.all relabelled learn-on.rxq was merged into one
    "learn-on.rxq: n=1012 measured connections" (500 and 512), exit 0."""
    def relabel(lines):
        start = _at(lines, "==RXL== LEARN BEGIN learn-on.all")
        for i in range(start, len(lines)):
            lines[i] = lines[i].replace("learn-on.all", "learn-on.rxq")
    p = _log(tmp_path, relabel)
    text = p.read_text().splitlines()
    begins = [n for n, line in enumerate(text, 1) if line == "==RXL== LEARN BEGIN learn-on.rxq"]
    assert len(begins) == 2
    line = _error(["learn", "--log", p])
    assert line == (f"Error: {p} line {begins[1]}: a second run labelled learn-on.rxq "
                    f"(the first began at line {begins[0]})")


# ------------------------------------------ 2: runs that are not whole

def _damage(tmp_path, edit):
    a = analyze_log(str(_log(tmp_path, edit)))
    return a, [e for e in a["errors"] if " damaged: " in e]


def _replace(old, new):
    def edit(lines):
        lines[_at(lines, old)] = new
    return edit


def test_a_run_whose_learnd_exited_non_zero_is_damaged_naming_the_end_line(tmp_path):
    """2: ``LEARN END learn-off.rxq rc=1`` was read (RunSummary.rc) and never
    used: the run reported with its targets, exit 0."""
    old = "==RXL== LEARN END learn-off.rxq rc=0"
    n = _at(PATCHED.read_text().splitlines(), old) + 1
    a, dmg = _damage(tmp_path, _replace(old, old[:-1] + "1"))
    assert dmg == [f"{tmp_path / 'x.log'}: run learn-off.rxq damaged: line {n}: learnd "
                   f"exited 1: {old[:-1]}1"]
    assert "learn-off.rxq" not in [m.label for m in a["metrics"]]
    assert sorted(m.label for m in a["metrics"]) == ["learn-on.all", "learn-on.rxq"]


def test_a_run_whose_learnd_exited_non_zero_fails_rxl_learn(tmp_path):
    p = _log(tmp_path, _replace("==RXL== LEARN END learn-off.rxq rc=0",
                                "==RXL== LEARN END learn-off.rxq rc=1"))
    r = _run(["learn", "--log", p])
    assert r.exit_code == 1
    assert r.stderr.splitlines()[-1].startswith(
        f"Error: {p}: run learn-off.rxq damaged: line 65: learnd exited 1: ")


def test_a_run_without_its_end_line_is_damaged_naming_its_done_line(tmp_path):
    lines = PATCHED.read_text().splitlines()
    done = _at(lines, "==RXL== LEARN DONE learn-off.rxq accepted=1091 elapsed_ms=61234 "
                      "stop=quit") + 1
    _, dmg = _damage(tmp_path, lambda ls: ls.remove("==RXL== LEARN END learn-off.rxq rc=0"))
    assert dmg == [f"{tmp_path / 'x.log'}: run learn-off.rxq damaged: line {done}: a DONE "
                   "line and no END line after it (learn-rc did not finish the run)"]


@pytest.mark.parametrize("done, word", [
    ("accepted=nan elapsed_ms=61234 stop=quit", "DONE's accepted= is no count (accepted=nan)"),
    ("accepted=1091 elapsed_ms=-5 stop=quit", "DONE's elapsed_ms= is no count (elapsed_ms=-5)"),
    ("accepted=1091 stop=quit", "DONE's elapsed_ms= is no count (elapsed_ms=(missing))"),
    ("accepted=1091 elapsed_ms=61234 stop=maybe", "DONE's stop= is not quit or deadline")])
def test_an_unreadable_done_value_damages_the_run_naming_the_line(tmp_path, done, word):
    old = "==RXL== LEARN DONE learn-off.rxq accepted=1091 elapsed_ms=61234 stop=quit"
    n = _at(PATCHED.read_text().splitlines(), old) + 1
    new = f"==RXL== LEARN DONE learn-off.rxq {done}"
    _, dmg = _damage(tmp_path, _replace(old, new))
    assert dmg == [f"{tmp_path / 'x.log'}: run learn-off.rxq damaged: line {n}: {word}: {new}"]


def test_a_pin_list_that_does_not_match_workers_damages_the_run(tmp_path):
    old = ("==RXL== LEARN RUN learn-off.rxq workers=2 port=8080 ncpu=8 nq=2 pin=0,2 "
           "hcpu_opt=0x1030")
    n = _at(PATCHED.read_text().splitlines(), old) + 1
    new = old.replace("pin=0,2", "pin=0,2,4")
    _, dmg = _damage(tmp_path, _replace(old, new))
    assert dmg == [f"{tmp_path / 'x.log'}: run learn-off.rxq damaged: line {n}: RUN's pin= "
                   f"lists 3 CPUs for workers=2: {new}"]


def test_a_c_line_whose_wcpu_contradicts_its_pinned_worker_damages_the_run(tmp_path):
    old = "==RXL== LEARN C learn-off.rxq phase=m worker=0 wcpu=0 hcpu=0 q=0 n=128"
    n = _at(PATCHED.read_text().splitlines(), old) + 1
    new = old.replace("wcpu=0", "wcpu=5")
    _, dmg = _damage(tmp_path, _replace(old, new))
    assert dmg == [f"{tmp_path / 'x.log'}: run learn-off.rxq damaged: line {n}: wcpu=5 but "
                   f"worker 0 is pinned to CPU 0 (its W line): {new}"]


def test_an_unpinned_or_unpinnable_worker_may_accept_anywhere():
    """wcpu is checked only against a worker pinned without error."""
    lines = ["==RXL== LEARN BEGIN r",
             "==RXL== LEARN W r worker=0 cpu=-1 accepts=1 errors=0 pinerr=0",
             "==RXL== LEARN C r phase=m worker=0 wcpu=3 hcpu=0 q=0 n=1",
             "==RXL== LEARN W r worker=1 cpu=2 accepts=1 errors=0 pinerr=22",
             "==RXL== LEARN C r phase=m worker=1 wcpu=3 hcpu=0 q=0 n=1",
             "==RXL== LEARN DONE r accepted=2 elapsed_ms=1 stop=deadline",
             "==RXL== LEARN END r rc=0"]
    r = R.parse_learn(lines)["r"]
    assert r.damage == [] and r.notes == [] and [c.n for c in r.counts] == [1, 1]


def test_the_recorded_and_synthetic_logs_have_no_damage():
    """Every whole run of tests/data/learn is undamaged (the checks are not
    stricter than learnd and learn-rc are)."""
    for p in sorted((DATA / "learn").glob("*.log")):
        runs = R.parse_learn(p.read_text().splitlines())
        assert runs and all(r.damage == [] for r in runs.values()), p


def test_the_ports_tool_refuses_what_learn_refuses(tmp_path):
    """rxl.learn.ports reads the same parser: a merged or damaged run is
    refused there too, not recomputed."""
    from click.testing import CliRunner
    from rxl.learn import ports as P
    log = tmp_path / "c.log"
    log.write_text("==RXL== LEARN BEGIN r\n==RXL== LEARN K r worker=0 40000:0\n"
                   "==RXL== LEARN BEGIN r\n")
    res = CliRunner().invoke(P.main, [str(log), "--label", "r"])
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [f"Error: {log} line 3: a second run labelled r (the "
                                       "first began at line 1)"]
    log.write_text("==RXL== LEARN K r worker=0 40000:0\n==RXL== LEARN END r rc=124\n")
    res = CliRunner().invoke(P.main, [str(log), "--label", "r"])
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [f"Error: {log}: run r damaged: line 2: learnd exited "
                                       "124: ==RXL== LEARN END r rc=124"]


# ------------------------------------------ 3: a key given twice

def test_a_learn_line_that_names_a_key_twice_is_malformed_and_named():
    """3: ``worker=0 worker=1``: dict() kept the last, the count went to
    worker 1 (shares 24.4%/75.6%), no note."""
    lines = ["==RXL== LEARN BEGIN r",
             "==RXL== LEARN W r worker=0 cpu=0 accepts=1 errors=0 pinerr=0",
             "==RXL== LEARN W r worker=1 cpu=2 accepts=1 errors=0 pinerr=0",
             "==RXL== LEARN C r phase=m worker=0 worker=1 wcpu=0 hcpu=0 q=0 n=128",
             "==RXL== LEARN C r phase=m worker=1 wcpu=2 hcpu=0 q=0 n=5"]
    r = R.parse_learn(lines)["r"]
    assert [(c.worker, c.n) for c in r.counts] == [(1, 5)]
    assert r.notes == [f"line 4: malformed learnd line (worker= twice): {lines[3]}"]


def test_a_groups_view_line_may_repeat_a_key():
    """GL lines carry the sysctl's text, not key=value items."""
    lines = ["==RXL== LEARN G r seq=0 t_ms=1 phase=m err=0 x=0:0:0:1",
             "==RXL== LEARN GL r seq=0 a=1 a=2"]
    r = R.parse_learn(lines)["r"]
    assert r.notes == [] and r.views[0]["lines"] == ["a=1 a=2"]


# ------------------------------------------ 6, 7: targets.yaml integers and ~user

@pytest.mark.parametrize("written, read", [
    ("026", "22 from its octal form"), ("22:22", "1342 from its sexagesimal (base 60) form"),
    ("1:30", "90 from its sexagesimal (base 60) form"), ("0b10110", "22 from its binary form"),
    ("2_222", "2222 from its underscored form"), ("0x16", "22 from its hexadecimal form")])
def test_a_port_that_is_not_decimal_digits_is_refused_with_its_key_path(work, written, read):
    """6: ``port: 026`` was ssh://root@h.example:22 (octal), ``22:22`` :1342."""
    t = work / "t.yaml"
    t.write_text(f"targets: {{b: {{kind: box, host: h.example, port: {written}}}}}\n")
    r = _run(["targets", "--targets", t])
    assert r.exit_code == 2
    assert r.stderr.splitlines()[-1] == f"Error: {t}: 1 mistake (listed above)"
    assert (f"{t}: targets.b.port: must be an integer in 1..65535, got {written} (YAML reads "
            f"{read}; write decimal digits)") in r.output.splitlines()


def test_a_shape_number_that_is_not_decimal_digits_is_refused(work):
    t = work / "t.yaml"
    t.write_text("shapes: {s: {memory_mib: 34:08}}\n")
    r = _run(["targets", "--targets", t])
    assert r.exit_code == 2
    assert (
        f"{t}: shapes.s.memory_mib: must be an integer >= 1, got 34:08 (YAML reads 2048 from "
        "its sexagesimal (base 60) form; write decimal digits)") in r.output.splitlines()


@pytest.mark.parametrize("written, port", [("22", 22), ("+22", 22), ("65535", 65535)])
def test_a_decimal_port_is_taken(work, written, port):
    from rxl.guest import targets
    t = work / "t.yaml"
    t.write_text(f"targets: {{b: {{kind: box, host: h.example, port: {written}}}}}\n")
    assert targets.load(str(t)).targets["b"].port == port


def test_a_key_under_an_unknown_user_is_no_such_user(work):
    """7: ``key: ~nosuchuser/k`` became t/~nosuchuser/k, exit 0."""
    t = work / "t.yaml"
    t.write_text("targets: {b: {kind: box, host: h.example, key: ~nosuchuser27n/k}}\n")
    r = _run(["targets", "--targets", t])
    assert r.exit_code == 2
    assert r.stderr.splitlines()[-1] == f"Error: {t}: 1 mistake (listed above)"
    assert f"{t}: targets.b.key: ~nosuchuser27n: no such user" in r.output.splitlines()


def test_a_key_under_a_known_user_is_that_users(work):
    from rxl.guest import targets
    t = work / "t.yaml"
    t.write_text("targets: {b: {kind: box, host: h.example, key: ~root/k}}\n")
    assert targets.load(str(t)).targets["b"].key == str(Path("~root").expanduser() / "k")


# ------------------------------------------ 4, 5: sites and diff check --kernel as record does

def _good_trace(work):
    """A trace of kern_accept4 (soaccept inside it, a lock cmpxchg in it)."""
    import json
    a, b = 0xFFFFFFFF80A00000, 0xFFFFFFFF80B00000
    doc = {"outer": "kern_accept4", "entries": {"kern_accept4": hex(a), "soaccept": hex(b)},
           "asm": {hex(a): "push %rbp", hex(a + 4): "call 0x0",
                   hex(b): "lock cmpxchg %rcx,(%rdx)", hex(b + 4): "ret", hex(a + 8): "ret"},
           "samples": [{"pc": [a, a + 4, b, b + 4, a + 8], "sp": [4096, 4096, 4088, 4088, 4096],
                        "complete": True}] * 3}
    p = work / "good.json"
    p.write_text(json.dumps(doc))
    return p


def _kernels(work):
    from fakefreebsd import kernel_bytes
    (work / "empty").write_bytes(b"")
    (work / "pie").write_bytes(kernel_bytes(etype=3, osabi=0))
    return work / "empty", work / "pie"


def _record_line(kernel, work):
    """What kcount record says of ``kernel``: the words sites and diff must say."""
    line = _error(["kcount", "record", "--kernel", kernel, "--out", work / "o.json",
                   "--dry-run"])
    head = "Error: Invalid value for '--kernel': "
    assert line.startswith(head), line
    return line[len(head):]


@pytest.mark.parametrize("which", ["empty", "pie"])
def test_sites_and_diff_refuse_a_kernel_as_record_does(work, which):
    """4: ``sites --kernel /bin/ls`` printed the atomics under '?', diff its
    table, exit 0; 5: an empty file was "Error: nm -P empty:" (nm's empty
    stderr)."""
    t = _good_trace(work)
    k = dict(zip(("empty", "pie"), _kernels(work)))[which]
    why = _record_line(k, work)
    if which == "empty":
        assert why == f"{k}: an empty file, no kernel"
    else:
        assert why.startswith(f"{k}: an ELF 64-bit LSB shared object") and \
            why.endswith("not a FreeBSD amd64 kernel (an ELF64 x86-64 executable, OS/ABI "
                         "FreeBSD or its brand note)")
    assert _error(["kcount", "sites", t, "--kernel", k]) == \
        f"Error: Invalid value for '--kernel': {why}"
    assert _error(["kcount", "diff", t, k, t, t]) == f"Error: Invalid value for BASE_KERNEL: {why}"


def test_a_trace_address_in_no_symbol_of_the_kernel_is_named(work, monkeypatch):
    """4: an address below every text symbol was counted under function '?'."""
    from fakefreebsd import kernel_bytes
    from rxl.bench import kcount
    k = work / "kernel"
    k.write_bytes(kernel_bytes())
    t = _good_trace(work)
    monkeypatch.setattr(kcount, "kernel_symbols",
                        lambda kernel, option="--kernel": "soaccept T ffffffff80b00000 10\n")
    want = (f"Error: {t}: 3 addresses of the trace (0xffffffff80a00000 ...) in no text symbol "
            f"of {k}: not the kernel it was recorded on")
    assert _error(["kcount", "sites", t, "--kernel", k]) == want
    assert _error(["kcount", "diff", t, k, t, k]) == want
    monkeypatch.setattr(kcount, "kernel_symbols",
                        lambda kernel, option="--kernel": "kern_accept4 T ffffffff80a00000 40\n"
                                                          "soaccept T ffffffff80b00000 10\n")
    r = _run(["kcount", "sites", t, "--kernel", k])
    assert r.exit_code == 0 and "  soaccept" in r.stdout and "?" not in r.stdout


# ------------------------------------------ 10, 11: --target as given, and no host there

@pytest.mark.parametrize("url", ["ssh://root@h.example\n", "ssh://root@h.example:22\n",
                                 "ssh://root@h.example:22/", "ssh://root@h.example/",
                                 "ssh://root@h.example ", " ssh://root@h.example"])
def test_a_target_with_anything_around_it_is_refused(url):
    """10: a trailing newline (stripped before the match) or '/' passed
    --check-only; the dry-run plan printed the newline."""
    from rxl.guest.ssh import TargetError, parse_url
    with pytest.raises(TargetError):
        parse_url(url)
    for mode in ("--check-only", "--dry-run"):
        line = _error(["run", mode, "--target", url])
        assert line.startswith("Error: Invalid value for '--target': "), line


@pytest.mark.parametrize("host, what", [
    ("224.0.0.1", "a multicast address"), ("[ff02::1]", "a multicast address"),
    ("255.255.255.255", "the broadcast address"), ("0.0.0.0", "the unspecified address"),
    ("[::]", "the unspecified address")])
def test_a_target_that_no_host_can_answer_is_refused(host, what):
    """11: multicast, broadcast and unspecified addresses passed --check-only;
    the run failed when it connected, after the programs' world build."""
    url = f"ssh://root@{host}"
    assert _error(["run", "--check-only", "--target", url]) == (
        f"Error: Invalid value for '--target': {url}: {host}: {what}, not a host")


@pytest.mark.parametrize("host", ["127.0.0.1", "10.0.0.255", "[::1]", "[fe80::1%em0]",
                                  "h.example"])
def test_a_target_host_that_can_answer_is_taken(host):
    from rxl.guest.ssh import parse_url
    assert parse_url(f"ssh://root@{host}:2222").port == 2222


def test_a_targets_file_host_is_checked_the_same_way(work):
    t = work / "t.yaml"
    t.write_text("targets: {b: {kind: box, host: 224.0.0.1}}\n")
    r = _run(["targets", "--targets", t])
    assert r.exit_code == 2
    assert f"{t}: targets.b.host: 224.0.0.1: a multicast address, not a host" in \
        r.output.splitlines()


# ------------------------------------------ 8, 9, 12: words

def test_a_shape_of_one_counts_in_the_singular(work):
    """8: "1 sockets x 1 dies x 2 cores x 2 threads, 1 NUMA nodes"."""
    t = work / "t.yaml"
    t.write_text("targets: {g: {kind: qemu, sockets: 1, dies: 1, cores: 2, threads: 1, "
                 "numa_nodes: 1, memory_mib: 2048}}\n")
    r = _run(["targets", "--targets", t])
    assert r.exit_code == 0, r.output
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("g ")]
    assert line.split(None, 1)[1] == ("own QEMU guest: 1 socket x 1 die x 2 cores x 1 thread, "
                                      "1 NUMA node, 2048 MiB, igb")


def test_spread_counts_values_and_domains_in_the_singular():
    """9: "1 values for the 2 devices"; "has 1 NUMA domain(s)"."""
    assert _error(["spread", "--topology", "2x4x2", "--intr-cpus", "0-7", "--queues", "2,2",
                   "--domain", "0"]) == ("Error: Invalid value for '--domain': 1 value for "
                                         "the 2 devices of --queues 2,2: give one per device "
                                         "('-' for unset)")
    line = _error(["spread", "--topology", "2x4x2", "--intr-cpus", "0-7", "--queues", "2",
                   "--domain", "5"])
    assert line.endswith("--domain 5: topology 2x4x2 has 1 NUMA domain"), line


def test_kcount_setsockopt_help_names_the_lock_under_rxl_work():
    """12: the help ended "Hold /work/cache/build.lock around it.", a path of
    the developers' machine."""
    r = _run(["kcount", "setsockopt", "--help"])
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())
    assert "/work/cache" not in text
    assert "hold the build lock around it (flock $RXL_WORK/build.lock" in text
