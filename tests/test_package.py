"""Package-level behaviour: version, thread control, CPU dispatch info, CLI."""
import json
import os
import subprocess
import sys

import pytest

import vflsec


def test_version_matches_metadata():
    from importlib.metadata import version

    assert vflsec.__version__ == version("vflsec")
    assert vflsec._core.__version__ == vflsec.__version__


def test_set_get_num_threads_roundtrip():
    before = vflsec.get_num_threads()
    try:
        vflsec.set_num_threads(1)
        assert vflsec.get_num_threads() == 1
        vflsec.set_num_threads(3)
        assert vflsec.get_num_threads() == 3
    finally:
        vflsec.set_num_threads(before)


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError),
                                      ("2", TypeError)])
def test_set_num_threads_rejects_bad_values(bad, exc):
    with pytest.raises(exc, match="n"):
        vflsec.set_num_threads(bad)


def test_omp_num_threads_is_honoured():
    code = "import vflsec; print(vflsec.get_num_threads())"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"


def test_cpu_features_reports_dispatch_flags():
    feats = vflsec.cpu_features()
    assert set(feats) >= {"avx2", "avx512f", "fma"}
    assert all(isinstance(v, bool) for v in feats.values())


def test_cli_version_and_help():
    out = subprocess.run([sys.executable, "-m", "vflsec", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == vflsec.__version__
    out = subprocess.run([sys.executable, "-m", "vflsec", "bench", "--help"], capture_output=True, text=True,
                         check=True)
    assert "kernels" in out.stdout


def test_cli_rejects_unknown_benchmark():
    out = subprocess.run([sys.executable, "-m", "vflsec", "bench", "nonsense"], capture_output=True, text=True)
    assert out.returncode != 0
    assert "invalid choice" in out.stderr


@pytest.mark.slow
def test_kernel_benchmark_quick_writes_outputs(tmp_path):
    """The benchmark runs end to end and writes consistent JSON, markdown and PNG."""
    from vflsec.bench import kernels as bench

    result = bench.run(quick=True, out=tmp_path, seed=5)
    data = json.loads((tmp_path / "kernels.json").read_text())
    assert data["machine"]["cpu"]
    # the seed and the machine's load around the run are recorded
    assert data["config"]["seed"] == 5
    assert len(data["load_average_before"]) == 3 and len(data["load_average_after"]) == 3
    kernels_seen = {r["kernel"] for r in data["results"]}
    assert kernels_seen == {"pairwise_distances", "pairwise_distance_stats", "fuzzy_cmeans", "gaussian_noise",
                            "gaussian_release"}
    assert all(r["seconds"] > 0 for r in data["results"])
    # The DP release beside numpy, torch, the insecure float path and the exact samplers,
    # with its two done-criteria measured in the same run.
    release = {r["method"] for r in data["results"] if r["kernel"] == "gaussian_release"}
    assert any("INSECURE" in m for m in release) and any("pure-Python" in m for m in release)
    assert any(m.startswith("numpy") for m in release) and any("C++ exact CKS" in m for m in release)
    criteria = data["release_criteria"]
    assert criteria["vs_numpy_1_thread"]["ratio"] > 0 and criteria["vs_pure_python_discrete"]["ratio"] > 0
    report = (tmp_path / "kernels.md").read_text()
    assert "Done criteria, as measured in this run" in report and "target >= 1000x" in report
    # vflsec is exact where the GEMM expansion is not: its error column must say so.
    ours = [r for r in data["results"] if r["kernel"] == "pairwise_distances" and r["method"] == "vflsec"]
    assert ours and all(r["max_rel_error"] <= 1e-5 and r.get("max_abs_diagonal", 0.0) == 0.0 for r in ours)
    assert any("max_abs_diagonal" in r for r in ours)
    assert (tmp_path / "kernels.png").stat().st_size > 1000
    assert len(result["summary"]) >= 7
