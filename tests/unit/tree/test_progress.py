"""rxl.progress: expected durations from the last run, recorded timings, the bar."""

import json

from rxl.tree import progress as P


def test_duration_text():
    assert P.duration(42.4) == "42 s"
    assert P.duration(251) == "4 min 11 s"
    assert P.duration(3720) == "1 h 02 min"


def test_expectation_last_run_then_measured_then_nothing(tmp_path):
    t = {"kernel-toolchain": {"seconds": 209.0, "targets": 3000}}
    assert P.expectation("kernel-toolchain", t) == "expected 3 min 29 s (last run here)"
    assert P.expectation("buildkernel-RXL", {}) == \
        "expected about 8 min 14 s cold (measured on a 2-core host)"
    assert P.expectation("parse", {}) == ""
    assert P.last_targets("kernel-toolchain", t) == 3000
    assert P.last_targets("buildkernel-RXL", t) is None


def test_record_and_load_round_trip_and_bad_files(tmp_path):
    path = tmp_path / "timings.json"
    assert P.load(path) == {}
    P.record("world-build", 305.04, 812, path)
    P.record("boot", 160, None, path)
    data = P.load(path)
    assert data["world-build"]["seconds"] == 305.0 and data["world-build"]["targets"] == 812
    assert data["boot"]["targets"] is None
    path.write_text(json.dumps({"a": {"seconds": float("nan")}, "b": {"seconds": -1},
                                "c": [1], "d": {"seconds": 3}}))
    assert set(P.load(path)) == {"d"}
    path.write_text("{not json")
    assert P.load(path) == {}
    P.record("x", 1, None, tmp_path / "f" / "timings.json")  # parent made
    (tmp_path / "file").write_text("")
    P.record("x", 1, None, tmp_path / "file" / "timings.json")  # unwritable: no error


def test_stage_bar_says_expected_counts_and_records(tmp_path):
    path = tmp_path / "timings.json"
    P.record("kernel-toolchain", 250, 4, path)
    lines = []
    bar = P.StageBar("kernel-toolchain", echo=lines.append, path=path, live=True)
    assert bar.total == 4
    for _ in range(6):
        bar.advance()
    bar.close()
    assert lines[0] == "kernel-toolchain: started, expected 4 min 10 s (last run here)"
    assert lines[-1].startswith("kernel-toolchain: done in ")
    assert P.load(path)["kernel-toolchain"]["targets"] == 6
    failed = P.StageBar("kernel-toolchain", echo=lines.append, path=path, live=False)
    failed.close(ok=False)
    assert lines[-1].startswith("kernel-toolchain: failed in ")
    assert P.load(path)["kernel-toolchain"]["targets"] == 6  # a failed run is not recorded


def test_patched_and_pristine_kernels_keep_their_own_times(tmp_path):
    """A kernel build's stages are keyed per objdir: the pristine kernel's
    cold build does not take the patched tree's incremental time."""
    from rxl.tree import build as B
    patched = B.plan_stages("/src", tmp_path / "obj", toolchain=True, lock=None)
    pristine = B.plan_stages("/p", tmp_path / "obj-p", toolchain=False, lock=None)
    assert [s.name for s in patched] == ["kernel-toolchain", "buildkernel-RXL"]
    assert patched[1].timing == f"buildkernel-RXL@{tmp_path / 'obj'}"
    assert pristine[0].timing == f"buildkernel-RXL@{tmp_path / 'obj-p'}"
    path = tmp_path / "timings.json"
    lines = []
    P.StageBar(patched[1].timing, echo=lines.append, path=path, live=False).close()
    assert lines[0] == "buildkernel-RXL: started, expected about 8 min 14 s cold " \
        "(measured on a 2-core host)"
    assert lines[1].startswith("buildkernel-RXL: done in ")
    t = P.load(path)
    assert P.expectation(patched[1].timing, t).endswith("(last run here)")
    assert P.expectation(pristine[0].timing, t) == \
        "expected about 8 min 14 s cold (measured on a 2-core host)"
    assert P.stage_name("buildkernel-RXL@/a@b") == "buildkernel-RXL"
