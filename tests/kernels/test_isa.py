"""The run-time ISA dispatch shared by every CPU kernel family (cpp/isa_dispatch.hpp).

Each family (noise + the lattice release, distances, fcm) reports the path it
uses (vflsec.kernels.kernel_isa), can be forced onto any path this CPU
supports (vflsec.kernels.force_isa, which restores the previous path on exit),
and refuses unknown or unsupported paths. The per-family bit-identity checks
live with the kernels' own tests (kernels/test_noise.py, dp/test_lattice_release.py,
kernels/test_distances.py); fcm's are here.
"""
from __future__ import annotations

import numpy as np
import pytest

import vflsec
from vflsec import _core, kernels

FAMILIES = {
    "noise": ["default", "avx2", "avx512f"],
    "distances": ["baseline", "avx2", "avx512f", "avx512vl"],
    "fcm": ["default", "avx2", "avx512f"],
}


def test_every_family_reports_a_known_path():
    report = kernels.kernel_isa()
    assert set(report) == set(FAMILIES)
    supported = kernels.supported_isas()
    assert set(supported) == set(FAMILIES)
    for family, path in report.items():
        assert path in FAMILIES[family]
        assert path in supported[family]
        assert supported[family][0] == FAMILIES[family][0]  # the portable path is always there
        assert set(supported[family]) <= set(FAMILIES[family])


def test_auto_is_the_best_supported_path():
    features = vflsec.cpu_features()
    for family in FAMILIES:
        with kernels.force_isa(family, "auto") as in_use:
            assert in_use == kernels.kernel_isa()[family]
    with kernels.force_isa("noise", "auto") as noise:
        if features["avx512f"] and features["avx512dq"] and features["avx512vl"]:
            assert noise == "avx512f"  # the lattice release's vector path needs F, DQ and VL
        elif features["avx2"]:
            assert noise == "avx2"
        else:
            assert noise == "default"


def test_forcing_each_supported_path_and_restoring():
    supported = kernels.supported_isas()
    for family, paths in FAMILIES.items():
        before = kernels.kernel_isa()
        for path in paths:
            if path in supported[family]:
                with kernels.force_isa(family, path) as in_use:
                    assert in_use == path
                    assert kernels.kernel_isa() == {**before, family: path}  # the other families untouched
            else:
                with pytest.raises(ValueError, match="does not support"):
                    with kernels.force_isa(family, path):
                        pytest.fail("entered the block of an unsupported path")
            assert kernels.kernel_isa() == before


def _two_distance_paths():
    paths = kernels.supported_isas()["distances"]
    if len(paths) < 2:
        pytest.skip("this CPU supports one distance path only")
    best = kernels.kernel_isa()["distances"]
    return best, next(p for p in paths if p != best)


def test_force_isa_restores_after_an_exception():
    best, other = _two_distance_paths()
    with pytest.raises(RuntimeError, match="inside"):
        with kernels.force_isa("distances", other):
            assert kernels.kernel_isa()["distances"] == other
            raise RuntimeError("inside")
    assert kernels.kernel_isa()["distances"] == best


def test_force_isa_nests():
    best, other = _two_distance_paths()
    with kernels.force_isa("distances", other):
        with kernels.force_isa("distances", best):
            assert kernels.kernel_isa()["distances"] == best
        assert kernels.kernel_isa()["distances"] == other  # the outer block's path, not "auto"
    assert kernels.kernel_isa()["distances"] == best


def test_unknown_names_refused():
    before = kernels.kernel_isa()
    with pytest.raises(ValueError, match="unknown ISA path 'sse9'"):
        with kernels.force_isa("fcm", "sse9"):
            pass
    with pytest.raises(ValueError, match="unknown kernel family 'gpu'"):
        with kernels.force_isa("gpu", "auto"):
            pass
    with pytest.raises(TypeError, match="must be str"):
        with kernels.force_isa("fcm", 2):
            pass
    assert kernels.kernel_isa() == before


def test_force_isa_is_the_only_way_in():
    # The compiled module keeps one selection hook, the one force_isa wraps;
    # the per-family duplicates it replaced must not come back.
    hooks = {name for name in dir(_core) if "isa" in name.lower()}
    assert hooks == {"kernel_isa", "_supported_kernel_isas", "_select_kernel_isa"}


def _fcm_runs(dtype):
    rng = np.random.default_rng(5)
    X = np.concatenate([rng.standard_normal((700, 5)) + 3, rng.standard_normal((613, 5)) - 2]).astype(dtype)
    out = []
    for m in (2.0, 1.5, 2.5):
        res = kernels.fuzzy_cmeans(X, 3, m=m, seed=1, max_iter=50)
        out.append((res.centers, res.membership, res.labels, res.objective_history))
    return out


def test_fcm_paths_agree():
    # float32: bit for bit. float64: the avx512f path fuses multiply-adds on its
    # 512-bit vectors (AVX-512F has FMA there), so the last bits may differ.
    paths = kernels.supported_isas()["fcm"]
    runs = {}
    for path in paths:
        with kernels.force_isa("fcm", path):
            runs[path] = (_fcm_runs(np.float32), _fcm_runs(np.float64))
    for path in paths[1:]:
        for a, b in zip(runs["default"][0], runs[path][0]):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)
        for a, b in zip(runs["default"][1], runs[path][1]):
            np.testing.assert_array_equal(a[2], b[2])
            for x, y in zip((a[0], a[1], a[3]), (b[0], b[1], b[3])):
                np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
        if path != "avx512f":
            for a, b in zip(runs["default"][1], runs[path][1]):
                for x, y in zip(a, b):
                    np.testing.assert_array_equal(x, y)
