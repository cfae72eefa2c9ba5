"""rxl.bench.kcount on traces with disassembly: marks, locks and atomics per call,
and the cost table's kcount-accept.json (``rxl kcount table``)."""

import json

import pytest
from click.testing import CliRunner

from rxl.bench import kcount, kcount_gdb, kcount_ops
from rxl.bench.cli import kcount_group as kcount_cmd

TD = 0xFFFFF80003A1C740

# kern_accept4 at 0x100 with soaccept at 0x200 (which takes and drops the
# inpcb's write lock) and, before it, the socket mutex taken and dropped.
ASM = {
    0x100: "push %rbp",
    0x101: "lock cmpxchg %rcx,(%rdi)",      # mtx_lock(&so->so_lock)
    0x102: "lock cmpxchg %rdx,(%rdi)",      # mtx_unlock
    0x103: "call 0x200 <soaccept>",
    0x104: "ret",
    0x200: "lock cmpxchg %rcx,(%rbx)",      # rw_wlock(inp)
    0x201: "lock xadd %eax,0x30(%rbx)",     # refcount
    0x202: "lock cmpxchg %rdx,(%rbx)",      # rw_wunlock
    0x203: "ret",
}
ACCEPT = {"pc": [0x100, 0x101, 0x102, 0x103, 0x200, 0x201, 0x202, 0x203, 0x104],
          "sp": [100, 100, 100, 100, 92, 92, 92, 92, 100],
          "cas": [[1, 0, TD], [2, TD, 0], [4, 1, TD], [6, TD, 1]],
          "curthread": TD}
EAGAIN = {"pc": [0x100, 0x104], "sp": [100, 100], "cas": [], "curthread": TD}


def _write(tmp_path, samples, outer="kern_accept4", asm=ASM, name="t.json"):
    doc = {"outer": outer,
           "entries": {outer: "0x100", "soaccept": "0x200",
                       "syncache_add": "0x300", "syncache_expand": "0x400"},
           "samples": samples}
    if asm is not None:
        doc["asm"] = {f"{k:#x}": v for k, v in asm.items()}
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


@pytest.mark.parametrize("text", [
    "lock cmpxchg %rcx,(%rdi)", "lock cmpxchg %r12,0x18(%rbx,%rax,8)",
    "lock cmpxchgq %rdx,(%rsi)", "lock cmpxchg %ecx,(%rdi)",
    "cmpxchg %rcx,(%rdi)", "lock xadd %rcx,(%rdi)", "mov %rax,%rbx", "ret",
])
def test_gdb_filter_equals_cas_source(text):
    scope = {}
    exec(kcount_gdb.GDB_CAS_SRC, scope)
    assert scope["cas_src"](text) == kcount_ops.cas_source(text)


def test_gdb_script_is_python():
    compile(kcount_gdb.GDB_SCRIPT, "<gdb script>", "exec")


def test_accept_marks_locks_and_atomics(tmp_path):
    doc = kcount.load(_write(tmp_path, [ACCEPT, EAGAIN, ACCEPT]))
    samples = kcount.samples_of(doc)
    assert [s.marks for s in samples] == [("soaccept",), (), ("soaccept",)]
    assert samples[0].ops == kcount_ops.Ops(atomics=5, locks=2, exclusive=2,
                                            shared=0, rm_reads=0)
    res = kcount.summarize(samples, "soaccept")
    assert res["total"]["median"] == 9 and res["other"] == {"n": 1}
    assert res["locks"]["median"] == 2 and res["atomics"]["median"] == 5
    assert kcount.case_value(doc) == {"instructions": 9, "locks": 2,
                                      "atomics": 5}


def test_syn_value_sums_the_syn_and_the_ack(tmp_path):
    asm = {0x100: "push %rbp", 0x101: "call", 0x102: "ret",
           0x300: "lock xadd %eax,(%rdi)", 0x301: "ret",
           0x400: "lock cmpxchg %rcx,(%rdi)", 0x401: "nop", 0x402: "ret"}
    syn = {"pc": [0x100, 0x101, 0x300, 0x301, 0x102],
           "sp": [100, 100, 92, 92, 100], "cas": [], "curthread": TD}
    ack = {"pc": [0x100, 0x101, 0x400, 0x401, 0x402, 0x102],
           "sp": [100, 100, 92, 92, 92, 100], "cas": [[2, 0, TD]],
           "curthread": TD}
    data = {"pc": [0x100, 0x102], "sp": [100, 100], "cas": [], "curthread": TD}
    doc = kcount.load(_write(tmp_path, [syn, data, ack, syn, data],
                             outer="tcp_input", asm=asm))
    assert kcount.case_value(doc) == {"instructions": 5 + 6, "locks": 1,
                                      "atomics": 2}


def test_case_value_refusals(tmp_path):
    old = kcount.load(_write(tmp_path, [ACCEPT], asm=None))
    with pytest.raises(kcount.KcountError, match="no disassembly"):
        kcount.case_value(old)
    nomark = kcount.load(_write(tmp_path, [EAGAIN]))
    with pytest.raises(kcount.KcountError, match="entered soaccept"):
        kcount.case_value(nomark)
    lookup = kcount.load(_write(tmp_path, [ACCEPT], outer="ip_input"))
    with pytest.raises(kcount.KcountError, match="outer ip_input has no default mark"):
        kcount.case_value(lookup)
    bad = dict(ACCEPT, cas=[[0, 0, TD]])
    with pytest.raises(kcount.KcountError, match="not a lock cmpxchg"):
        kcount.samples_of(kcount.load(_write(tmp_path, [bad])))


def test_table_cli_writes_the_issue_schema(tmp_path):
    t = _write(tmp_path, [ACCEPT, EAGAIN])
    out = tmp_path / "k.json"
    r = CliRunner().invoke(kcount_cmd, [
        "table", "--trace", "accept-on-tagged", "patched", t,
        "--trace", "accept-off", "patched-old", t,
        "--trace", "accept-off", "pristine", t, "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert list(doc) == ["accept-off", "accept-on-tagged"]
    assert list(doc["accept-off"]) == ["pristine", "patched-old"]
    assert doc["accept-on-tagged"]["patched"] == {"instructions": 9,
                                                  "locks": 2, "atomics": 5}


@pytest.mark.parametrize("args,msg", [
    (["accept", "pristine"], "case 'accept'"),
    (["syn-on", "patched-new"], "variant 'patched-new'"),
])
def test_table_cli_refuses_unknown_names(tmp_path, args, msg):
    t = _write(tmp_path, [ACCEPT])
    r = CliRunner().invoke(kcount_cmd, ["table", "--trace", *args, t])
    assert r.exit_code == 2 and msg in r.output


# The handshake in two traces: tcp_input --only-syn (the SYN entering
# syncache_add at 0x300) and syncache_expand traced as the outer function
# (at 0x100 here), whose call that made the socket enters syncache_socket.
SYN_ASM = {0x100: "push %rbp", 0x101: "call", 0x102: "ret",
           0x300: "lock xadd %eax,(%rdi)", 0x301: "ret"}
SYN = {"pc": [0x100, 0x101, 0x300, 0x301, 0x102],
       "sp": [100, 100, 92, 92, 100], "cas": [], "curthread": TD}
EXPAND_ASM = {0x100: "push %rbp", 0x101: "call", 0x102: "ret",
              0x500: "lock cmpxchg %rcx,(%rdi)", 0x501: "lock xadd %eax,(%rsi)",
              0x502: "ret"}
EXPAND = {"pc": [0x100, 0x101, 0x500, 0x501, 0x502, 0x102],
          "sp": [100, 100, 92, 92, 92, 100], "cas": [[2, 0, TD]], "curthread": TD}
# A syncache_expand() that found no entry (a stale ACK) makes no socket.
STALE = {"pc": [0x100, 0x102], "sp": [100, 100], "cas": [], "curthread": TD}


def _expand(tmp_path, samples, name="x.json"):
    doc = {"outer": "syncache_expand",
           "entries": {"syncache_expand": "0x100", "syncache_socket": "0x500"},
           "samples": samples, "asm": {f"{k:#x}": v for k, v in EXPAND_ASM.items()}}
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def test_syncache_expand_counts_only_calls_that_made_a_socket(tmp_path):
    doc = kcount.load(_expand(tmp_path, [STALE, EXPAND, STALE]))
    assert kcount.mark_values(doc) == {
        "syncache_socket": {"instructions": 6, "locks": 1, "atomics": 2}}
    assert kcount.case_value(doc) == {"instructions": 6, "locks": 1, "atomics": 2}


def test_handshake_adds_the_syn_and_the_expand_traces(tmp_path):
    syn = kcount.load(_write(tmp_path, [SYN, SYN], outer="tcp_input", asm=SYN_ASM))
    ack = kcount.load(_expand(tmp_path, [EXPAND, STALE]))
    assert kcount.mark_values(syn) == {
        "syncache_add": {"instructions": 5, "locks": 0, "atomics": 1}}
    assert kcount.handshake_value([syn, ack]) == {"instructions": 11, "locks": 1,
                                                  "atomics": 3}
    with pytest.raises(kcount.KcountError, match="no trace has the handshake's ACK"):
        kcount.handshake_value([syn])
    with pytest.raises(kcount.KcountError, match="SYN is in two traces"):
        kcount.handshake_value([syn, ack, syn])
    with pytest.raises(kcount.KcountError, match="no trace has the handshake's SYN"):
        kcount.handshake_value([kcount.load(_expand(tmp_path, [STALE, EXPAND]))])


def test_table_cli_adds_syn_traces_and_refuses_two_accepts(tmp_path):
    syn = _write(tmp_path, [SYN], outer="tcp_input", asm=SYN_ASM, name="s.json")
    ack = _expand(tmp_path, [EXPAND])
    r = CliRunner().invoke(kcount_cmd, ["table", "--trace", "syn-on", "pristine", syn,
                                        "--trace", "syn-on", "pristine", ack])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"syn-on": {"pristine": {
        "instructions": 11, "locks": 1, "atomics": 3}}}
    t = _write(tmp_path, [ACCEPT])
    r = CliRunner().invoke(kcount_cmd, ["table", "--trace", "accept-off", "patched", t,
                                        "--trace", "accept-off", "patched", t])
    assert r.exit_code == 2 and "accept-off patched: give one trace, not 2" in r.output


def test_only_syn_goes_to_gdb_for_tcp_input_only():
    argv = kcount.gdb_argv("k", "127.0.0.1:1", "o", "s", samples=1, outer="tcp_input",
                           entries={"tcp_input": 0x10}, only_syn=True)
    assert "set $kc_only_syn = 1" in argv
    plain = kcount.gdb_argv("k", "127.0.0.1:1", "o", "s", samples=1, outer="tcp_input",
                            entries={"tcp_input": 0x10})
    assert "set $kc_only_syn = 0" in plain
    with pytest.raises(kcount.KcountError, match="--only-syn reads tcp_input"):
        kcount.gdb_argv("k", "127.0.0.1:1", "o", "s", samples=1, outer="kern_accept4",
                        entries={"kern_accept4": 0x10}, only_syn=True)


@pytest.mark.parametrize("flags,stepped", [
    (0x02, True),    # SYN
    (0x12, False),   # SYN|ACK
    (0x10, False),   # the handshake's ACK
    (0x18, False),   # PSH|ACK
    (0x11, False),   # FIN|ACK
])
def test_gdb_syn_filter_constants(flags, stepped):
    scope = {}
    exec(kcount_gdb.GDB_SYN, scope)
    assert scope["is_syn"](flags) is stepped


def test_others_run_and_limit_go_to_gdb():
    argv = kcount.gdb_argv("k", "127.0.0.1:1", "o", "s", samples=1, outer="syncache_expand",
                           entries={"syncache_expand": 0x10}, others_run=True, limit=500)
    assert 'set $kc_sched = "off"' in argv and "set $kc_limit = 500" in argv
    held = kcount.gdb_argv("k", "127.0.0.1:1", "o", "s", samples=1,
                           entries={"in_pcblookup_mbuf": 0x10})
    assert 'set $kc_sched = "step"' in held
