"""Shared fixtures and the hypothesis profiles.

The ``ci`` profile (the default) runs every property with at least 1,000
examples; ``RXL_HYPOTHESIS=dev`` runs 100 for quick
iterations; ``deep`` (``make test-deep``) runs 10,000.
"""

import os
import tempfile

# The suite never reads or writes the user's $RXL_WORK (its build lock, stores,
# keys and logs): every test process, and every rxl it starts, gets its own.
# Set before any rxl module is imported (rxl.paths reads it at import).
os.environ["RXL_WORK"] = tempfile.mkdtemp(prefix="rxl-test-work-")
# Nor the user's RXL_BASE_URL, which the README sets for `make run` from a
# mirror: the tests that plan a fetch give --base-url or expect patches/BASE's.
os.environ.pop("RXL_BASE_URL", None)

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=1000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=100, deadline=None)
# make test-deep: 10,000 examples per property, not in CI.
settings.register_profile(
    "deep", max_examples=10000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("RXL_HYPOTHESIS", "ci"))


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _own_timings(tmp_path_factory, monkeypatch):
    """Stage timings a test's run records go to a directory of the test session,
    never to the user's $RXL_WORK/timings.json (rxl.tree.progress)."""
    from rxl.tree import progress
    path = tmp_path_factory.getbasetemp() / "timings.json"
    monkeypatch.setattr(progress, "timings_path", lambda: path)


@pytest.fixture
def kernel_file(tmp_path):
    """A kernel file as a dry run checks one (rxl.tree.build.check_kernel_file:
    an ELF64 x86-64 executable of OS/ABI FreeBSD); nothing past its header."""
    from fakefreebsd import kernel_bytes
    path = tmp_path / "kernel"
    path.write_bytes(kernel_bytes())
    return path
