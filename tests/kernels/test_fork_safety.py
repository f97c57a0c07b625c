"""Kernels in forked children (issue 18 items 8-9): after the parent ran a
multi-threaded OpenMP kernel, a forked child must still finish every kernel
(libgomp's thread pool does not survive fork), and a fork taken while another
thread draws from a NoiseGenerator must leave the child a usable generator."""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading

import numpy as np
import pytest

import vflsec
from vflsec import kernels
from vflsec.kernels import NoiseGenerator

pytestmark = pytest.mark.skipif(sys.platform != "linux" or not hasattr(os, "fork"), reason="needs fork")


def _all_kernels(_=None) -> float:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3000, 16))
    d = kernels.pairwise_distances(x)
    fit = kernels.fuzzy_cmeans(x, 3, seed=0)
    y = kernels.add_gaussian_noise(np.zeros(2_000_000), 1.0)
    z = kernels.gaussian_noise(2_000_000, 1.0)
    k = kernels.discrete_gaussian(200_000, 50.0)
    return float(d[0, 1] + fit.centers.sum() + y[0] + z[0] + k[0])


@pytest.mark.slow  # forked child processes
def test_forked_children_finish_every_kernel_after_the_parent_used_threads():
    before = vflsec.get_num_threads()
    vflsec.set_num_threads(2)
    try:
        _all_kernels()  # starts libgomp's thread pool in the parent
        ctx = mp.get_context("fork")
        with ctx.Pool(4) as pool:
            result = pool.map_async(_all_kernels, range(8))
            values = result.get(timeout=120)  # a hang is a failure, not a stuck suite
        assert len(values) == 8 and all(np.isfinite(values))
    finally:
        vflsec.set_num_threads(before)


def _draw_in_child(conn) -> None:
    gen = _SHARED["gen"]
    conn.send(float(kernels.add_gaussian_noise(np.zeros(10), 1.0, generator=gen)[0]))
    conn.close()


_SHARED = {}


@pytest.mark.slow  # forked child processes
def test_fork_while_another_thread_draws_leaves_a_usable_generator():
    gen = NoiseGenerator()
    _SHARED["gen"] = gen
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            kernels.add_gaussian_noise(np.zeros(64), 1.0, generator=gen)

    threads = [threading.Thread(target=hammer, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    ctx = mp.get_context("fork")
    try:
        for _ in range(40):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_draw_in_child, args=(child,))
            proc.start()
            proc.join(20)
            if proc.is_alive():
                proc.kill()
                pytest.fail("a forked child deadlocked on the generator's lock")
            assert proc.exitcode == 0 and np.isfinite(parent.recv())
    finally:
        stop.set()
        for t in threads:
            t.join(5)
