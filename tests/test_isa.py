"""The run-time ISA dispatch shared by every CPU kernel family (cpp/isa_dispatch.hpp).

Each family (noise + the lattice release, distances, fcm) reports the path it
uses, can be forced onto any path this CPU supports, and refuses unknown or
unsupported paths. The per-family bit-identity checks live with the kernels'
own tests (test_noise.py, test_lattice_release.py, test_distances.py); fcm's
are here.
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


@pytest.fixture
def restore_paths():
    yield
    for family in FAMILIES:
        _core._select_kernel_isa(family, "auto")


def test_every_family_reports_a_known_path():
    report = _core.kernel_isa()
    assert set(report) == set(FAMILIES)
    supported = _core._supported_kernel_isas()
    for family, path in report.items():
        assert path in FAMILIES[family]
        assert path in supported[family]
        assert supported[family][0] == FAMILIES[family][0]  # the portable path is always there


def test_auto_is_the_best_supported_path(restore_paths):
    features = vflsec.cpu_features()
    for family in FAMILIES:
        assert _core._select_kernel_isa(family, "auto") == _core.kernel_isa()[family]
    noise = _core.kernel_isa()["noise"]
    if features["avx512f"] and features["avx512dq"] and features["avx512vl"]:
        assert noise == "avx512f"  # the lattice release's vector path needs F, DQ and VL
    elif features["avx2"]:
        assert noise == "avx2"
    else:
        assert noise == "default"


def test_legacy_hooks_follow_the_shared_state(restore_paths):
    for path in _core._supported_kernel_isas()["noise"]:
        assert _core._noise_select_isa(path) == path
        assert _core.kernel_isa()["noise"] == path == _core._noise_isa()
    for path in _core._supported_kernel_isas()["distances"]:
        assert _core.set_distance_kernel_isa(path)
        assert _core.kernel_isa()["distances"] == path == _core.distance_kernel_isa()


def test_forcing_each_supported_path(restore_paths):
    supported = _core._supported_kernel_isas()
    for family, paths in FAMILIES.items():
        for path in paths:
            if path in supported[family]:
                assert _core._select_kernel_isa(family, path) == path
                assert _core.kernel_isa()[family] == path
            else:
                before = _core.kernel_isa()[family]
                with pytest.raises(ValueError, match="does not support"):
                    _core._select_kernel_isa(family, path)
                assert _core.kernel_isa()[family] == before


def test_unknown_names_refused(restore_paths):
    before = _core.kernel_isa()
    with pytest.raises(ValueError, match="unknown ISA path 'sse9'"):
        _core._select_kernel_isa("fcm", "sse9")
    with pytest.raises(ValueError, match="unknown kernel family"):
        _core._select_kernel_isa("gpu", "auto")
    assert _core.kernel_isa() == before


def _fcm_runs(dtype):
    rng = np.random.default_rng(5)
    X = np.concatenate([rng.standard_normal((700, 5)) + 3, rng.standard_normal((613, 5)) - 2]).astype(dtype)
    out = []
    for m in (2.0, 1.5, 2.5):
        res = kernels.fuzzy_cmeans(X, 3, m=m, seed=1, max_iter=50)
        out.append((res.centers, res.membership, res.labels, res.objective_history))
    return out


def test_fcm_paths_agree(restore_paths):
    # float32: bit for bit. float64: the avx512f path fuses multiply-adds on its
    # 512-bit vectors (AVX-512F has FMA there), so the last bits may differ.
    paths = _core._supported_kernel_isas()["fcm"]
    runs = {}
    for path in paths:
        _core._select_kernel_isa("fcm", path)
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
