"""rxl bench accept: dispersion figures, knobs, labels, tables."""

import math
from types import SimpleNamespace

import pytest

from rxl.bench import dispersion as D
from rxl.bench import knobs as K
from rxl.bench import tables as T

# ---------------------------------------------------------- dispersion


def test_dispersion_even_and_monopoly():
    even = [64] * 8
    assert D.idle(even) == 0 and D.cv(even) == 0 and D.max_min(even) == 1
    assert D.top_k_share(even, D.default_k(8)) == pytest.approx(0.25)
    mono = [500] + [0] * 7
    assert D.idle(mono) == 7
    # One worker with everything: cv = sqrt(n - 1) (first principles).
    assert D.cv(mono) == pytest.approx(math.sqrt(7))
    assert math.isinf(D.max_min(mono))
    assert D.top_k_share(mono, 1) == 1.0


def test_dispersion_issue_cases():
    # 4 connections on 4 workers, one idle: the rounded mean hid it.
    assert D.idle([2, 1, 1, 0]) == 1
    # 256 workers, 75% on six in the middle: top-k sees it, the
    # first/last columns (ranks 0 and 255) did not.
    counts = [0] * 256
    for i in range(125, 131):
        counts[i] = 125
    counts[0] = counts[255] = 0
    for i in range(1, 51):          # the other 250 on ranks 1..50
        counts[i] = 5
    assert D.default_k(256) == 64
    assert D.top_k_share(counts, 6) == pytest.approx(0.75)
    assert D.idle(counts) == 256 - 6 - 50
    assert D.figures([3, 1])["max_min"] == 3.0


def test_dispersion_rejects():
    with pytest.raises(ValueError):
        D.cv([])
    with pytest.raises(ValueError):
        D.idle([1, -1])
    with pytest.raises(ValueError, match="k must"):
        D.top_k_share([1, 2], 3)
    assert D.cv([0, 0]) == 0.0 and D.max_min([0, 0]) == 1.0

# --------------------------------------------------------------- knobs


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_finite_rejects_nan_and_inf(bad):
    with pytest.raises(ValueError, match="finite"):
        K.finite(bad, "--spacing-ms", 0, 10000)
    with pytest.raises(ValueError, match="finite"):
        K.Knobs(abort_share=bad).validate(8)
    with pytest.raises(ValueError, match="finite"):
        K.Knobs(hold_ms=bad).validate(8)
    with pytest.raises(ValueError, match="finite"):
        K.Knobs(lag_ms=bad).validate(8)


def test_parsers():
    assert K.parse_hold("client") is None and K.parse_hold("2500") == 2500
    # No 10 s cap on holding any more: up to an hour.
    assert K.parse_hold("60000") == 60000
    for bad in ("nan", "inf", "-1", "x", "3600001"):
        with pytest.raises(ValueError, match="--hold-ms"):
            K.parse_hold(bad)
    assert K.parse_batch("unlimited") == 0 and K.parse_batch("1") == 1
    assert K.parse_batch("64") == 64 and K.parse_batch("007") == 7
    # 0 is acceptd's own spelling of unlimited, not a count of 1..64
    for bad in ("65", "-1", "many", "0", "00", "+5", "٣", "1_0", "", "0x10"):
        with pytest.raises(ValueError, match="accepts-per-wakeup"):
            K.parse_batch(bad)
    assert K.parse_untagged("none") == -1 and K.parse_untagged("last") is None
    assert K.parse_untagged("3") == 3
    for bad in ("-2", "x"):
        with pytest.raises(ValueError, match="--untagged"):
            K.parse_untagged(bad)


def test_knobs_argv_and_checks():
    k = K.Knobs()
    argv = k.argv()
    assert argv[argv.index("-M") + 1] == "loop"
    assert argv[argv.index("-H") + 1] == "0" and "-l" not in argv
    k = K.Knobs(server="serial", work_kind="cpu", hold_ms=None,
                accepts_per_wakeup=1, client="closed", concurrency=4,
                abort_share=0.1, abort_kind="handshake", untagged=-1,
                lag_ms=2.5)
    a = k.argv()
    assert a[a.index("-H") + 1] == "-1" and a[a.index("-a") + 1] == "1"
    assert a[a.index("-l") + 1] == "4" and a[a.index("-x") + 1] == "100"
    assert a[a.index("-X") + 1] == "handshake"
    assert a[a.index("-u") + 1] == "none" and a[a.index("-L") + 1] == "2500"
    with pytest.raises(ValueError, match="needs --server loop"):
        k.check_setup("accept-mutex")
    k.check_setup("exclusive")
    with pytest.raises(ValueError, match="below --workers"):
        K.Knobs(untagged=8).validate(8)
    K.Knobs(untagged=-1).validate(1)          # one worker, none untagged
    with pytest.raises(ValueError, match="--client"):
        K.Knobs(client="half-open").validate(8)
    # A closed loop holding 100 ms per connection, 4 in flight, 40
    # connections: 10 rounds of (100 + 1) ms.
    assert K.Knobs(client="closed", concurrency=4,
                   hold_ms=100).extra_ms(40) == pytest.approx(1010)


def test_run_label_by_parameters():
    base = {"version": 2, "setup": "reorder", "reorder_every": 1,
            "server": "loop", "workers": 8, "work_us": 0, "hold_us": 0}
    # A fault once seen: --reorder-every 1 was labelled reorder16.
    assert K.run_label(base) == "reorder1"
    assert K.run_label({**base, "reorder_every": 16}) == "reorder16"
    lab = K.run_label({**base, "setup": "exclusive", "server": "serial",
                       "work_us": 5000, "work_kind": "cpu",
                       "hold_us": -1, "accepts_per_wakeup": 1,
                       "client": "closed", "concurrency": 8,
                       "abort_permille": 100, "abort_kind": "reset"})
    assert lab == ("exclusive serial work=5ms cpu hold=client batch=1 "
                   "closed x8 abort=10%reset")
    inc = {**base, "setup": "incoming-cpu", "untagged_rank": -1}
    assert K.run_label(inc) == "incoming-cpu untagged=none"
    assert K.run_label({**inc, "untagged_rank": 7}) == "incoming-cpu"
    # Version 1 runs carry no model: no suffix.
    assert K.run_label({"version": 1, "setup": "noflag"}) == "noflag"

# -------------------------------------------------------------- tables


def _run(accepts, **raw):
    pw = [{"rank": i, "open_max": 1} for i in range(len(accepts))]
    return SimpleNamespace(accepts=list(accepts), workers=len(accepts),
                           local=[0] * len(accepts),
                           cpu_ms=[1.0] * len(accepts), lost=0,
                           raw={"per_worker": pw, **raw})


def test_tables_show_imbalance():
    runs = [_run([2, 1, 1, 0]), _run([1, 1, 1, 1])]
    s = SimpleNamespace(label="noflag", runs=runs)
    (row,) = T.imbalance_rows([s])
    assert row[1] == "0.5 (0.0-1.0) of 4"
    assert row[4].endswith("inf in 1/2")
    assert [D.idle(r.accepts) > 0 for r in runs] == [True, False]
    # Means keep a decimal: 0.5 does not read as 0.
    assert T.per_rank([[1, 0], [0, 0]]) == "0.5 (0.0-1.0) 0.0"
    wide = T.per_rank([[0] * 20 + [9] * 4])
    assert "24 workers" in wide and "idle in every run: 20" in wide


def test_client_rows_and_end_warnings():
    lat = {"n": 10, "p50": 40, "p90": 60, "p99": 100, "max": 900}
    s = SimpleNamespace(label="x", runs=[_run([5, 5], conn_per_s=5000.0,
                                              connect_us=lat, aborted=2,
                                              resets=1)])
    (row,) = T.client_rows([s])
    assert row[1] == "5000" and row[2] == "40 / 100 (p99 max 100)"
    assert row[4] == "-"
    raw = {"per_worker": [{"rank": 0, "busy_at_stop": True, "open_end": 2},
                          {"rank": 1, "killed_at_end": True}]}
    w = T.end_warnings(raw)
    assert any("inside their work" in x for x in w)
    assert any("killed at the end" in x for x in w)
    assert any("2 connections were still open" in x for x in w)
    assert T.end_warnings({"per_worker": [{"rank": 0}]}) == []
