"""``vflsec bench kernels`` through the one runner: a tiny real run writes the envelope,
every kernel's rows and the release's targets judged as claims; the report
re-renders unchanged; --device cuda refuses in one line where there is no GPU."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")

from vflsec.cli import main  # noqa: E402

# The shipped [quick] grid shrunk to seconds; every kernel, the child-process case included.
TINY = """
[quick]
seed = 0
threads = 2
repeats = 1
pairwise_n = 60
pairwise_d = [4]
pairwise_accuracy_rows = 500
stats_n = 60
stats_d = 4
stats_big_n = 80
fcm_n = 300
fcm_d = 3
fcm_c = 3
fcm_iters = 2
noise_n = 2000
release_n = 2000
release_epsilon = 1.0
release_delta = 1e-5
cks_n = 200
python_n = 20
baseline_n = 20
"""


def test_a_tiny_run_writes_every_kernel_the_envelope_and_the_judged_targets(tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "out"
    assert main(["bench", "kernels", "--quick", "--config", str(config), "--seed", "5", "--out", str(out)]) == 0
    data = json.loads((out / "kernels.json").read_text())
    # the runner's envelope: the seed given on the command line, the machine and its load around the run
    assert data["benchmark"] == "kernels" and data["seed"] == 5 and data["config"]["seed"] == 5
    assert data["machine"]["cpu"] and data["quick"] is True and "partial" not in data
    assert len(data["load"]["start"]["loadavg"]) == 3 and len(data["load"]["end"]["loadavg"]) == 3
    assert {"numpy", "scipy", "torch", "scikit-fuzzy"} <= set(data["versions"])
    kernels_seen = {r["kernel"] for r in data["results"]}
    assert kernels_seen == {"pairwise_distances", "pairwise_distance_stats", "fuzzy_cmeans", "gaussian_noise",
                            "gaussian_release"}
    assert all(r["seconds"] > 0 for r in data["results"])
    assert any(r.get("pairs") == 80 * 79 // 2 for r in data["results"])  # the child process's case ran
    # The DP release beside numpy, torch, the insecure float path and the exact samplers,
    # its two targets measured in the same run and judged against papers/vflsec_targets.toml.
    release = {r["method"] for r in data["results"] if r["kernel"] == "gaussian_release"}
    assert any("INSECURE" in m for m in release) and any("pure-Python" in m for m in release)
    assert any(m.startswith("numpy") for m in release) and any("C++ exact CKS" in m for m in release)
    criteria = data["release_criteria"]
    assert criteria["vs_numpy_1_thread"]["ratio"] > 0 and criteria["vs_pure_python_discrete"]["ratio"] > 0
    assert criteria["vs_numpy_1_thread"]["target"] == 1.0 and criteria["vs_pure_python_discrete"]["target"] == 1000.0
    assert isinstance(criteria["vs_numpy_1_thread"]["met"], bool)
    report = (out / "kernels.md").read_text()
    assert "Done criteria, as measured in this run" in report and "| >= 1000x |" in report
    assert "papers/vflsec_targets.toml" in report and "## Conclusion" in report
    # vflsec is exact where the GEMM expansion is not: its error column must say so.
    ours = [r for r in data["results"] if r["kernel"] == "pairwise_distances" and r["method"] == "vflsec"]
    assert ours and all(r["max_rel_error"] <= 1e-5 and r.get("max_abs_diagonal", 0.0) == 0.0 for r in ours)
    assert (out / "kernels.png").stat().st_size > 1000
    assert len(data["summary"]) >= 7
    # The report needs nothing but the results: --rerender writes it again, identical.
    (out / "kernels.md").unlink()
    assert main(["bench", "kernels", "--rerender", str(out)]) == 0
    assert (out / "kernels.md").read_text() == report


def test_the_release_targets_are_the_claims_of_the_targets_file():
    from vflsec.bench.experiments.kernels.analysis import (
        NUMPY_RELEASE,
        PURE_PYTHON_SAMPLER,
        SECURE_RELEASE,
        release_claims,
        release_criteria,
        release_verdicts,
    )

    assert {(c.quantity, c.op, c.threshold) for c in release_claims()} == {
        ("kernels.release_vs_numpy_1_thread", ">=", 1.0), ("kernels.release_vs_pure_python_discrete", ">=", 1000.0)}

    def row(method, seconds, unit, **extra):
        return {"kernel": "gaussian_release", "case": unit, "method": method, "seconds": seconds, "unit": unit,
                "threads": 1, **extra}

    # the release at 2x numpy's time (does not hold), 500x the pure-Python sampler per value (does not hold)
    rows = [row(NUMPY_RELEASE, 1.0, "CPU s"), row(SECURE_RELEASE, 2.0, "CPU s"),
            row(SECURE_RELEASE, 1e-9, "CPU s/value"), row(PURE_PYTHON_SAMPLER, 5e-7, "CPU s/value")]
    verdicts = {v.claim.quantity: v for v in release_verdicts(rows)}
    assert verdicts["kernels.release_vs_numpy_1_thread"].measured == pytest.approx(0.5)
    assert verdicts["kernels.release_vs_pure_python_discrete"].measured == pytest.approx(500.0)
    assert {v.word for v in verdicts.values()} == {"does not hold"}
    assert release_criteria(rows)["vs_numpy_1_thread"] == {"ratio": pytest.approx(0.5), "target": 1.0, "met": False}
    # without the rows, nothing is measured (a partial run)
    assert {v.word for v in release_verdicts(rows[:1])} == {"not measured"}


def test_device_cuda_without_a_gpu_is_one_line_and_writes_nothing(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        main(["bench", "kernels", "--device", "cuda", "--quick", "--seed", "0", "--out", str(out)])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vflsec bench kernels: error: --device cuda: torch sees no CUDA device") and "\n" not in err
    assert not out.exists()


def test_device_cuda_reads_the_cuda_grid_and_its_seed():
    from vflsec.bench.experiments.kernels import EXPERIMENT
    from vflsec.bench.runner import load_grid

    grid = load_grid(EXPERIMENT, {"device": "cuda", "quick": True, "seed": 4})
    assert type(grid).__name__ == "CudaKernelsGrid" and grid.seed == 4 and grid.noise_n == 1_000_000
    assert EXPERIMENT.results_name({"device": "cuda"}) == "kernels-cuda.json"
    assert EXPERIMENT.results_name({"device": "cpu"}) == "kernels.json"
