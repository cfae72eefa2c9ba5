"""rxl.tree.base's hold of the build lock around fetching and applying.

Fetching the base and applying the series in the work clone change a tree
that a build may be reading: both hold ``flock(lock)`` (the lock make.py's
stages take), wait for it when another holder has it, say so once, and
let it go afterwards, also when the work fails.
"""

import fcntl
import subprocess
import sys
import threading
import time

import pytest

from fakefreebsd import _series, _tree
from rxl.tree import base as B


def _holder(lock, seconds):
    """A separate process holding ``lock`` for ``seconds`` (flock(1)-like)."""
    code = ("import fcntl, sys, time\n"
            "fh = open(sys.argv[1], 'a')\n"
            "fcntl.flock(fh, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(lock), str(seconds)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def _free(lock):
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fh, fcntl.LOCK_UN)
        return True


def test_work_clone_waits_for_the_lock_and_releases_it(tmp_path):
    src = tmp_path / "src"
    base = _tree(src)
    patches = _series(tmp_path, src, base)
    lock = tmp_path / "locks" / "build.lock"      # its directory is made
    lock.parent.mkdir()
    holder = _holder(lock, 1.5)
    said = []
    t0 = time.monotonic()
    tree, _ = B.resolve(str(src), str(tmp_path / "work"), patches_dir=patches,
                        lock=str(lock), echo=said.append)
    waited = time.monotonic() - t0
    holder.wait()
    assert said[0] == f"tree: waiting for the build lock {lock}"
    assert waited >= 1.0                          # it did not apply beside the holder
    assert (tmp_path / "work" / f"src-{base[:12]}" / "sys/kern/kern_y.c").is_file()
    assert _free(lock)                            # released after the work


def test_lock_is_released_when_the_work_fails(tmp_path):
    lock = tmp_path / "build.lock"
    said = []
    with pytest.raises(RuntimeError):
        with B._held(str(lock), said.append):
            assert not _free_from_thread(lock)
            raise RuntimeError("apply failed")
    assert said == [] and _free(lock)


def test_no_lock_and_dry_run_take_none(tmp_path):
    with B._held(None, lambda s: pytest.fail(s)):
        pass
    src = tmp_path / "src"
    base = _tree(src)
    patches = _series(tmp_path, src, base)
    lock = tmp_path / "build.lock"
    holder = _holder(lock, 30)
    try:   # a dry run never waits for the lock another holds: it changes nothing
        t0 = time.monotonic()
        tree, _ = B.resolve(str(src), str(tmp_path / "work"), patches_dir=patches,
                            dry_run=True, lock=str(lock), echo=lambda s: None)
        assert time.monotonic() - t0 < 10          # the holder keeps it for 30 s
        assert not _free(lock)                     # still held: it was never ours
    finally:
        holder.kill()
        holder.wait()
    assert tree.commands and any("git clone" in c for c in tree.commands)
    assert not (tmp_path / "work").exists()        # planned, not made


def _free_from_thread(lock):
    """flock locks belong to open file descriptions: another open of the file,
    even in this process, sees the lock held."""
    out = []
    t = threading.Thread(target=lambda: out.append(_free(lock)))
    t.start()
    t.join()
    return out[0]
