"""rxl.bench.kcount's sites and diff: a traced call's locks and atomics by function."""

from rxl.bench import kcount


TD = 0xFFFFF80003A1C740
NM = """kern_accept4 T ffffffff80000100 40
soaccept T ffffffff80000200 10
data_thing D ffffffff80000150 8
"""


def test_symbolizer_maps_a_pc_into_its_function():
    name = kcount.symbolizer(NM)
    assert name(0xFFFFFFFF80000100) == "kern_accept4"
    assert name(0xFFFFFFFF80000160) == "kern_accept4"   # data symbols do not split text
    assert name(0xFFFFFFFF80000205) == "soaccept"
    assert name(0xFFFFFFFF800000FF) == "?"


def test_sites_split_atomics_and_acquisitions_by_function():
    a, b = 0xFFFFFFFF80000100, 0xFFFFFFFF80000200
    asm = {a: "push %rbp", a + 1: "lock cmpxchg %rcx,(%rdi)", a + 2: "lock cmpxchg %rdx,(%rdi)",
           a + 3: "call", b: "lock xadd %eax,(%rbx)", b + 1: "ret", a + 4: "ret"}
    sample = {"pc": [a, a + 1, a + 2, a + 3, b, b + 1, a + 4],
              "cas": [[1, 0, TD], [2, TD, 0]], "curthread": TD}
    got = kcount.sites(sample, asm, kcount.symbolizer(NM))
    # mtx_lock (an acquisition) and mtx_unlock (an atomic only) inline in
    # kern_accept4; a refcount in soaccept.
    assert got == {"kern_accept4": (2, 1), "soaccept": (1, 0)}


def test_self_diff_lists_only_changed_functions_largest_first():
    a = {"kern_accept4": 300, "soaccept": 187, "tcp_usr_accept": 90}
    b = {"kern_accept4": 300, "soaccept": 187, "tcp_usr_accept": 101, "in_pcblb_accepted": 40}
    assert kcount.self_diff(a, b) == [("in_pcblb_accepted", 0, 40), ("tcp_usr_accept", 90, 101)]


def test_self_counts_take_the_low_median_per_function(tmp_path):
    import json
    from rxl.bench import kcount
    a, b = 0xFFFFFFFF80000100, 0xFFFFFFFF80000200
    # kern_accept4 runs 3 own instructions and soaccept 2 in two calls, a
    # third call also runs soaccept twice as long; one call never entered it.
    calls = [[a, a + 1, b, b + 1, a + 2], [a, a + 1, b, b + 1, a + 2],
             [a, a + 1, b, b + 1, b + 2, b + 3, a + 2], [a, a + 2]]
    sps = {a: 100, a + 1: 100, a + 2: 100, b: 92, b + 1: 92, b + 2: 92, b + 3: 92}
    doc = {"outer": "kern_accept4", "entries": {"kern_accept4": hex(a), "soaccept": hex(b)},
           "samples": [{"pc": c, "sp": [sps[p] for p in c]} for c in calls]}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    got = kcount.self_counts(kcount.load(str(p)), "soaccept", kcount.symbolizer(NM))
    assert got == {"kern_accept4": 3, "soaccept": 2}
