"""rxl.bench.lbsetsock: the guest rc, the LBSET lines and the setsockopt target's verdict."""

import pytest
from click.testing import CliRunner

from rxl.bench import lbsetsock as L
from rxl.bench.cli import kcount_group as kcount_cmd
from rxl.errors import BadOption
from fakefreebsd import kernel_bytes

M = "==RXL== LBSET"


def _lines(rebuilds_after=7, idle=100000, loop=110000, calls=1000000, errors=0,
           members=256, tagerr=0, done=True, change=0):
    out = [f"{M} CREATE members={members} tagged=1 reps=20 p50_ns=900000 min_ns=850000 "
           f"nvcsw=0 tagerr={tagerr}",
           f"{M} GROUP members={members} port=9100 ncpu=8 tagerr={tagerr} blocks=10 "
           f"change={change} uid=65534",
           f"{M} LAT idle n=2000 p50_ns={idle} p90_ns={idle * 2} p99_ns={idle * 3}",
           f"{M} LAT loop n=900 p50_ns={loop} p90_ns={loop * 2} p99_ns={loop * 3}",
           f"{M} LOOP calls={calls} errors={errors} elapsed_ns=40000000000",
           f"{M} REBUILDS before=7 after={rebuilds_after}",
           "some other console line LBSET DONE"]
    return out + ([f"{M} DONE"] if done else [])


def test_verdict_meets_both_targets():
    v = L.verdict(L.parse(_lines()))
    assert v["rebuilds"] == 0 and v["rebuilds_ok"]
    assert v["ratio"] == 1.1 and v["ratio_ok"]


@pytest.mark.parametrize("kw,field", [
    ({"rebuilds_after": 8}, "rebuilds_ok"),      # one rebuild is one too many
    ({"loop": 120001}, "ratio_ok"),              # just over 1.2x idle
])
def test_verdict_misses_a_target(kw, field):
    v = L.verdict(L.parse(_lines(**kw)))
    assert v[field] is False


def test_ratio_of_exactly_the_target_is_met():
    assert L.verdict(L.parse(_lines(loop=120000)))["ratio_ok"] is True


@pytest.mark.parametrize("kw,msg", [
    ({"done": False}, "did not finish"),
    ({"calls": 999999}, "need 1000000 calls"),
    ({"errors": 3}, "without error"),
    ({"members": 255}, "need 256 members"),
    ({"tagerr": 256}, "all tagged"),            # a kernel without the series
])
def test_verdict_refuses_a_short_or_failed_run(kw, msg):
    with pytest.raises(L.LbsetError, match=msg):
        L.verdict(L.parse(_lines(**kw)))


def test_parse_refuses_a_non_integer():
    with pytest.raises(L.LbsetError, match="not an integer"):
        L.parse([f"{M} LOOP calls=many errors=0"])


def test_rc_runs_the_program_once_and_powers_off():
    rc = L.render_rc(["-n", "256", "-c", "1000000"])
    assert "/rxl/lbsetsock -n 256 -c 1000000\n" in rc
    assert rc.index("lbsetsock -n") < rc.index("$M END") < rc.index("reboot -p")
    with pytest.raises(L.LbsetError, match="plain word"):
        L.render_rc(["-n", "256; rm -rf /"])


def _kernel(tmp_path):
    """A file that passes for the kernel to boot (a dry run boots nothing)."""
    k = tmp_path / "kernel"
    k.write_bytes(kernel_bytes())
    return str(k)


def test_cli_dry_run_prints_cc_and_qemu(tmp_path):
    r = CliRunner().invoke(kcount_cmd, ["setsockopt", "--kernel", _kernel(tmp_path), "--src", str(tmp_path),
                                        "--objdir", str(tmp_path), "--out",
                                        str(tmp_path / "o"), "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "lbsetsock.c" in r.output and "qemu-system-x86_64" in r.output
    assert "-c 1000000" in r.output and "-P 10" in r.output and "-U 65534" in r.output
    assert " -a" not in r.output


def _with_control(lines, control=150000, errors=0):
    extra = [f"{M} LAT control n=800 p50_ns={control} p90_ns={control * 2} "
             f"p99_ns={control * 3}",
             f"{M} CONTROL calls=1000000 errors={errors} elapsed_ns=30000000000"]
    return lines[:4] + extra + lines[4:]


def test_control_separates_the_hosts_share_from_the_series():
    # Loop 1.6x idle (target missed), but the unrelated SO_SNDBUF loop is
    # 1.5x idle too: the series' no-op path costs the bystander 1.6/1.5.
    v = L.verdict(L.parse(_with_control(_lines(idle=100000, loop=160000), control=150000)))
    assert v["ratio"] == 1.6 and v["ratio_ok"] is False
    assert v["control_ratio"] == 1.5 and v["loop_vs_control"] == 1.067


def test_a_run_without_control_lines_has_no_control_fields():
    assert "loop_vs_control" not in L.verdict(L.parse(_lines()))


def test_control_errors_or_missing_latency_are_refused():
    with pytest.raises(L.LbsetError, match="control loop had errors"):
        L.verdict(L.parse(_with_control(_lines(), errors=2)))
    lines = [ln for ln in _with_control(_lines()) if "LAT control" not in ln]
    with pytest.raises(L.LbsetError, match="no control latency"):
        L.verdict(L.parse(lines))


@pytest.mark.parametrize("opt,val", [("--members", "300"), ("--blocks", "0"),
                                     ("--rounds", "0"), ("--calls", "-1")])
def test_cli_refuses_out_of_range_values_before_anything_runs(tmp_path, opt, val):
    r = CliRunner().invoke(kcount_cmd, ["setsockopt", "--kernel", _kernel(tmp_path), "--src", str(tmp_path),
                                        "--objdir", str(tmp_path), "--out",
                                        str(tmp_path / "o"), "--dry-run", opt, val])
    assert r.exit_code == 2 and opt in r.output
    assert not (tmp_path / "o").exists()


def test_cli_refuses_more_blocks_than_rounds(tmp_path):
    r = CliRunner().invoke(kcount_cmd, ["setsockopt", "--kernel", _kernel(tmp_path), "--src", str(tmp_path),
                                        "--objdir", str(tmp_path), "--out", str(tmp_path / "o"),
                                        "--dry-run", "--rounds", "5", "--blocks", "6"])
    assert r.exit_code == 2 and "--blocks" in r.output


def test_tunables_reach_the_dry_run(tmp_path):
    r = CliRunner().invoke(kcount_cmd, ["setsockopt", "--kernel", _kernel(tmp_path), "--src", str(tmp_path),
                                        "--objdir", str(tmp_path), "--out", str(tmp_path / "o"),
                                        "--dry-run", "--tunable", "net.isr.bindthreads=1"])
    assert r.exit_code == 0 and "loader tunable net.isr.bindthreads=1" in r.output


@pytest.mark.parametrize("word", ["noequals", "=1", "a=b c", "a.b="])
def test_a_malformed_tunable_is_a_usage_error(tmp_path, word):
    r = CliRunner().invoke(kcount_cmd, ["setsockopt", "--kernel", _kernel(tmp_path), "--src", str(tmp_path),
                                        "--objdir", str(tmp_path), "--out", str(tmp_path / "o"),
                                        "--dry-run", "--tunable", word])
    assert r.exit_code == 2 and "--tunable" in r.output
    assert not (tmp_path / "o").exists()


def test_change_mode_expects_one_rebuild_per_call():
    """--change: every call is a real change, so every call rebuilds."""
    v = L.verdict(L.parse(_lines(change=1, rebuilds_after=7 + 1000000)))
    assert v["change"] and v["rebuilds_expected"] == 1000000 and v["rebuilds_ok"]
    v = L.verdict(L.parse(_lines(change=1, rebuilds_after=7 + 999999)))
    assert v["rebuilds_ok"] is False        # a change that did not rebuild
    assert L.verdict(L.parse(_lines(change=0, rebuilds_after=8)))["rebuilds_ok"] is False


def test_a_view_without_a_rebuild_count_is_not_a_pass():
    """The series' view has no deal counter since R5: lbsetsock.c prints -1,
    and 0 rebuilds is then not measured rather than met."""
    lines = [ln.replace("before=7 after=7", "before=-1 after=-1") for ln in _lines()]
    v = L.verdict(L.parse(lines))
    assert v["rebuilds"] is None and v["rebuilds_ok"] is None
    assert v["ratio_ok"]


def test_a_run_without_the_groups_view_is_refused():
    lines = [ln for ln in _lines() if "REBUILDS" not in ln]
    with pytest.raises(L.LbsetError, match="no rebuild count of the group"):
        L.verdict(L.parse(lines))


def _create(tagged=1, p50=900000, nvcsw=0, members=256, tagerr=0):
    return L.parse([f"{M} CREATE members={members} tagged={tagged} reps=20 p50_ns={p50} "
                    f"min_ns={p50 - 1000} nvcsw={nvcsw} tagerr={tagerr}", f"{M} DONE"])


def test_create_verdict_against_pristine():
    v = L.create_verdict(_create(p50=1100000), _create(tagged=0, p50=1000000))
    assert v["ratio"] == 1.1 and v["ratio_ok"] and v["sleeps_ok"]
    v = L.create_verdict(_create(p50=1100001, nvcsw=3), _create(tagged=0, p50=1000000))
    assert v["ratio_ok"] is False and v["sleeps_ok"] is False
    with pytest.raises(L.LbsetError, match="need every member tagged"):
        L.create_verdict(_create(tagged=0), _create(tagged=0))
    with pytest.raises(L.LbsetError, match="need every member tagged"):
        L.create_verdict(_create(tagerr=256), _create(tagged=0))   # a pristine kernel
    with pytest.raises(L.LbsetError, match="need 256 each"):
        L.create_verdict(_create(), _create(tagged=0, members=255))
    with pytest.raises(L.LbsetError, match="no CREATE line in the pristine"):
        L.create_verdict(_create(), L.parse([f"{M} DONE"]))


def _create_first(tagged=1, p50=900000, first=300000):
    return L.parse([f"{M} CREATE members=256 tagged={tagged} reps=20 p50_ns={p50} "
                    f"min_ns={p50} nvcsw=0 tagerr=0 first_p50_ns={first} "
                    f"total_p50_ns={p50 + first}", f"{M} DONE"])


def test_create_verdict_counts_the_first_connection_where_the_series_deals():
    # Creation alone within 1.1x, but a first accept(2) that deals for 0.4 ms
    # puts creation plus it at (1.0 + 0.7) / (1.0 + 0.3) = 1.308x: not met.
    v = L.create_verdict(_create_first(p50=1000000, first=700000),
                         _create_first(tagged=0, p50=1000000, first=300000))
    assert v["ratio"] == 1.0 and v["ratio_ok"]
    assert v["total_ratio"] == 1.308 and v["total_ratio_ok"] is False
    assert v["patched_total_p50_ns"] == 1700000 and v["pristine_total_p50_ns"] == 1300000
    v = L.create_verdict(_create_first(p50=1000000, first=310000),
                         _create_first(tagged=0, p50=1000000, first=300000))
    assert v["total_ratio"] == round(1310000 / 1300000, 3) and v["total_ratio_ok"]
    # A run from a program without the field (older console logs): no total.
    assert "total_ratio" not in L.create_verdict(_create(), _create_first(tagged=0))


def test_program_args():
    assert L.program_args() == ["-n", "256", "-k", "20", "-c", "1000000", "-r", "2000",
                                "-P", "10", "-U", "65534"]
    assert L.program_args(change=True)[-1] == "-a"
    assert L.program_args(calls=0, untagged=True)[-1] == "-u"
    with pytest.raises(BadOption, match="only created") as e:
        L.program_args(untagged=True)
    assert e.value.option == "--untagged"
    with pytest.raises(BadOption, match="min") as e:
        L.program_args(calls=5, blocks=6)
    assert e.value.option == "--blocks"


def test_cli_creation_only_and_change_reach_the_program(tmp_path):
    base = ["setsockopt", "--kernel", _kernel(tmp_path), "--src", str(tmp_path), "--objdir", str(tmp_path),
            "--out", str(tmp_path / "o"), "--dry-run"]
    r = CliRunner().invoke(kcount_cmd, base + ["--calls", "0", "--untagged"])
    assert r.exit_code == 0, r.output
    assert "-c 0 " in r.output and r.output.count(" -u") == 1
    r = CliRunner().invoke(kcount_cmd, base + ["--change"])
    assert r.exit_code == 0 and "-U 65534 -a" in r.output
    r = CliRunner().invoke(kcount_cmd, base + ["--untagged"])
    assert r.exit_code == 2 and "'--untagged': --untagged members are only created" in r.output


def test_control_takes_the_tags_place_only_on_untagged_members():
    # -s: one setsockopt(TCP_NODELAY) per member where the tag would be.
    assert L.program_args(calls=0, untagged=True, control=True)[-2:] == ["-u", "-s"]
    with pytest.raises(BadOption, match="needs --untagged") as e:
        L.program_args(calls=0, control=True)
    assert e.value.option == "--control"


def test_cli_control_reaches_the_program_and_is_refused_without_untagged(tmp_path):
    base = ["setsockopt", "--kernel", _kernel(tmp_path), "--src", str(tmp_path), "--objdir",
            str(tmp_path), "--out", str(tmp_path / "o"), "--dry-run", "--calls", "0"]
    r = CliRunner().invoke(kcount_cmd, base + ["--untagged", "--control"])
    assert r.exit_code == 0, r.output
    assert r.output.count(" -u -s") == 1
    r = CliRunner().invoke(kcount_cmd, base + ["--control"])
    assert r.exit_code == 2 and "'--control'" in r.output and "needs --untagged" in r.output
    assert not (tmp_path / "o").exists()


def test_program_source_makes_the_control_call_only_with_s():
    # The C side: -s is refused without -u, and the control is TCP_NODELAY,
    # an IPPROTO_TCP option like the tag (the same tcp_ctloutput path).
    src = L.source().read_text()
    assert "(control && !untagged)" in src
    assert "setsockopt(s, IPPROTO_TCP, TCP_NODELAY" in src
    assert "control=%d" in src


def test_create_verdict_refuses_a_control_baseline():
    ctl = L.parse([f"{M} CREATE members=256 tagged=0 reps=20 p50_ns=1000000 min_ns=990000 "
                   f"nvcsw=0 tagerr=0 control=1", f"{M} DONE"])
    assert ctl["create"]["control"] == 1
    with pytest.raises(L.LbsetError, match="baseline is plain untagged"):
        L.create_verdict(_create(), ctl)


# ------------------------------------------- --accept (review 15l MINOR-3)

def _accept_lines(change=1, calls=2000, loop_acc=None, ctl_acc=None, marked=16, dealt=16,
                  deal_errors=0, deals=True):
    """A --accept run: 2000 calls of each loop, each followed by a connection."""
    loop_acc = calls if loop_acc is None else loop_acc
    ctl_acc = calls if ctl_acc is None else ctl_acc
    out = [f"{M} CREATE members=256 tagged=1 reps=3 p50_ns=900000 min_ns=850000 "
           f"nvcsw=0 tagerr=0 first_p50_ns=300000 total_p50_ns=1200000 control=0",
           f"{M} GROUP members=256 port=9100 ncpu=8 tagerr=0 blocks=10 change={change} "
           f"uid=65534 accept=1",
           f"{M} LAT idle n=2000 p50_ns=1000000 p90_ns=2000000 p99_ns=3000000",
           f"{M} LAT control n=900 p50_ns=2000000 p90_ns=4000000 p99_ns=6000000",
           f"{M} LAT loop n=950 p50_ns=2500000 p90_ns=5000000 p99_ns=7500000",
           f"{M} LOOP calls={calls} errors=0 elapsed_ns=600000000 accepted={loop_acc}",
           f"{M} CONTROL calls={calls} errors=0 elapsed_ns=500000000 accepted={ctl_acc}",
           f"{M} REBUILDS before=-1 after=-1"]
    if deals:
        out.append(f"{M} DEALS checks=16 marked={marked} dealt={dealt} errors={deal_errors}")
    return out + [f"{M} DONE"]


def test_parse_reads_the_accept_fields_and_the_deals_line():
    res = L.parse(_accept_lines())
    assert res["group"]["accept"] == 1
    assert res["loop"]["accepted"] == 2000 and res["control"]["accepted"] == 2000
    assert res["deals"] == {"checks": 16, "marked": 16, "dealt": 16, "errors": 0}
    assert L.parse(_lines())["deals"] == {}          # a run without -A has none


def test_accept_verdict_is_a_measurement_without_the_call_floor():
    v = L.verdict(L.parse(_accept_lines()))
    assert v["accept"] is True and v["change"] is True and v["calls"] == 2000
    assert v["ratio"] == 2.5 and v["ratio_ok"] is None       # no target for it
    assert v["loop_vs_control"] == 1.25 and v["control_ratio"] == 2.0
    assert v["loop_per_call_ns"] == 300000 and v["control_per_call_ns"] == 250000
    assert v["deals"] == {"checks": 16, "marked": 16, "dealt": 16} and v["deals_ok"] is True
    assert v["rebuilds"] is None and v["rebuilds_expected"] == 2000


def test_accept_verdict_without_change_expects_no_deal():
    v = L.verdict(L.parse(_accept_lines(change=0, marked=0, dealt=0)))
    assert v["change"] is False and v["deals_ok"] is True and v["rebuilds_expected"] == 0
    assert L.verdict(L.parse(_accept_lines(change=0, marked=1, dealt=1)))["deals_ok"] is False
    # a change whose accept(2) did not deal, or that did not mark the group
    assert L.verdict(L.parse(_accept_lines(marked=16, dealt=15)))["deals_ok"] is False
    assert L.verdict(L.parse(_accept_lines(marked=15, dealt=15)))["deals_ok"] is False
    # a view without the deal flag: not measured, not a pass
    assert L.verdict(L.parse(_accept_lines(marked=-1, dealt=-1)))["deals_ok"] is None


@pytest.mark.parametrize("kw,msg", [
    ({"loop_acc": 1999}, "loop accepted 1999 of 2000"),
    ({"ctl_acc": 0}, "control accepted 0 of 2000"),
    ({"deals": False}, "no DEALS line"),
    ({"deal_errors": 1}, "need checks without error"),
])
def test_accept_verdict_refuses_a_lost_connection_or_a_missing_check(kw, msg):
    with pytest.raises(L.LbsetError, match=msg):
        L.verdict(L.parse(_accept_lines(**kw)))


def test_accept_verdict_needs_the_control_loop():
    lines = [ln for ln in _accept_lines() if "CONTROL" not in ln and "LAT control" not in ln]
    with pytest.raises(L.LbsetError, match="no CONTROL line"):
        L.verdict(L.parse(lines))


def test_a_run_without_accept_keeps_the_call_floor_and_the_target():
    v = L.verdict(L.parse(_lines()))
    assert v["accept"] is False and v["ratio_ok"] is True and "deals" not in v
    assert v["loop_per_call_ns"] == 40000


def test_program_args_accept():
    assert L.program_args(change=True, accept=True)[-2:] == ["-a", "-A"]
    assert L.program_args(accept=True)[-1] == "-A" and "-a" not in L.program_args(accept=True)
    with pytest.raises(BadOption, match="--calls 0 makes none") as e:
        L.program_args(calls=0, accept=True)
    assert e.value.option == "--accept"


def _setsockopt_base(tmp_path):
    return ["setsockopt", "--kernel", _kernel(tmp_path), "--src", str(tmp_path), "--objdir",
            str(tmp_path), "--out", str(tmp_path / "o"), "--dry-run"]


def test_cli_accept_reaches_the_program(tmp_path):
    r = CliRunner().invoke(kcount_cmd, _setsockopt_base(tmp_path)
                           + ["--change", "--accept", "--calls", "2000"])
    assert r.exit_code == 0, r.output
    assert "-c 2000 " in r.output and "-U 65534 -a -A" in r.output


@pytest.mark.parametrize("extra", [["--calls", "0"], ["--calls", "0", "--untagged"],
                                   ["--calls", "0", "--change"]])
def test_cli_refuses_accept_without_calls_in_one_error_line(tmp_path, extra):
    r = CliRunner().invoke(kcount_cmd, _setsockopt_base(tmp_path) + ["--accept"] + extra)
    assert r.exit_code == 2
    errors = [ln for ln in r.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1
    if "--change" in extra:     # --change is refused first, with its own option
        assert "'--change'" in errors[0]
    else:
        assert errors[0] == ("Error: Invalid value for '--accept': --accept connects to "
                             "the group after each setsockopt call: --calls 0 makes none")
    assert not (tmp_path / "o").exists()


def test_program_source_connects_after_each_call_only_with_A():
    # The C side: -A is refused without calls, the loop child and the
    # control make the same connection, and the lines carry the new fields.
    src = L.source().read_text()
    assert "(lp.accept && calls == 0)" in src
    assert "if (!lp->accept)\n\t\t\t\tcontinue;" in src
    assert "uid=%u accept=%d" in src and " accepted=%ld" in src
    assert "DEALS checks=%d marked=%d dealt=%d errors=%d" in src
