"""fuzzy_cmeans runs its native loop in slices so Ctrl-C can stop it (issue 18,
item 12); slicing must not change the result."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from vflsec.kernels import fcm


def _fields(result):
    return (result.centers, result.membership, result.labels, result.confidence,
            result.objective_history, result.n_iter, result.converged, result.center_shift)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("init", ["random", "kmeans++", "centers"])
@pytest.mark.parametrize("per_call", [1, 2, 7])
def test_sliced_run_is_bit_identical(monkeypatch, dtype, init, per_call):
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(size=(60, 4)), rng.normal(loc=3.0, size=(60, 4))]).astype(dtype)
    start = X[[0, 70, 119]].copy() if init == "centers" else init
    whole = fcm.fuzzy_cmeans(X, 3, init=start, seed=5, max_iter=40, tol=1e-7)
    monkeypatch.setattr(fcm, "_MIN_ITERATIONS_PER_CALL", per_call)
    monkeypatch.setattr(fcm, "_WORK_PER_CALL", 1.0)
    assert fcm._iterations_per_call(*X.shape, 3) == per_call
    sliced = fcm.fuzzy_cmeans(X, 3, init=start, seed=5, max_iter=40, tol=1e-7)
    assert whole.n_iter > per_call  # the sliced run really was cut
    for a, b in zip(_fields(whole), _fields(sliced)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_sliced_run_stops_at_max_iter(monkeypatch):
    X = np.random.default_rng(0).normal(size=(80, 3))
    monkeypatch.setattr(fcm, "_MIN_ITERATIONS_PER_CALL", 3)
    monkeypatch.setattr(fcm, "_WORK_PER_CALL", 1.0)
    result = fcm.fuzzy_cmeans(X, 4, seed=1, max_iter=10, tol=1e-300)
    assert result.n_iter == 10 and not result.converged
    assert len(result.objective_history) == 10


@pytest.mark.slow  # a python subprocess
def test_ctrl_c_interrupts_a_long_run():
    # Without slicing this call holds the interpreter for minutes: the native
    # loop releases the GIL but never returns to let Python see SIGINT.
    code = textwrap.dedent("""
        import sys, numpy as np
        from vflsec.kernels import fuzzy_cmeans
        # m = 1.3 on uniform data: thousands of updates without converging,
        # about 2 ms each here (minutes for max_iter = 100000).
        X = np.random.default_rng(0).uniform(size=(20000, 8))
        print("started", flush=True)
        try:
            fuzzy_cmeans(X, 20, m=1.3, max_iter=100000, tol=1e-300, seed=0)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(0)
        print("finished", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        waited = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert out.strip() == "interrupted"
    assert waited < 10.0, f"Ctrl-C took {waited:.1f} s to stop fuzzy_cmeans"
