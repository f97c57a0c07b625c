"""The secret-sharing MPC rows of ``vflsec bench glm``: their configuration keys are checked like
every other, a runtime cell records CPU seconds and the engine's bytes beside the Channel's, an
accuracy cell lands where plain VFL's does (the same recursion on shares), the report shows them
beside HE with each engine protocol's threat model, and a run without SPU (the ``mpc`` extra)
labels them "not run" instead of failing."""
import importlib.util
import re
import sys
from dataclasses import replace

import numpy as np
import pytest

from vflsec.bench import runner
from vflsec.bench.config import shipped_config_text
from vflsec.bench.errors import BenchConfigError
from vflsec.bench.experiments.glm import EXPERIMENT, accuracy
from vflsec.bench.experiments.glm.grid import GLMBenchConfig, HyperParams, load_config
from vflsec.bench.experiments.glm.mpc_cells import NOT_INSTALLED, spu_installed

NEEDS_SPU = pytest.mark.skipif(not spu_installed(), reason="needs the mpc extra (SPU)")

# One Breast split of 60 rows and a one-configuration grid: an MPC accuracy cell in a few seconds.
SMALL = GLMBenchConfig.quick_run(split_seeds=1, noise_draws=1, epsilons=(1.0,), he_accuracy={},
                                 mpc_accuracy={"mpc_semi2k": ("breast",)}, figure2=False, max_rows=60,
                                 grid_batch_sizes=(3200,), plain_extra_batch_sizes=(32,), grid_epochs=(3,),
                                 grid_k=(1.0,), runtime_methods=("plain", "ckks", "mpc_semi2k"),
                                 runtime_sizes=(240,), runtime_epochs=(1, 2), runtime_epochs_n=240,
                                 runtime_batch_size=80, runtime_he_batches={}, runtime_mpc_batches={},
                                 spectrum_epsilons=(), he_dp_accuracy={}, opacus_epsilons=())


def _quick_copy(tmp_path, old, new):
    """The shipped glm.toml with one line of its [quick] table edited."""
    text = shipped_config_text("glm")
    quick = text.index("\n[quick]\n")
    assert old in text[quick:], old
    path = tmp_path / "glm.toml"
    path.write_text(text[:quick] + text[quick:].replace(old, new, 1))
    return path


def test_mpc_keys_are_validated_with_one_line_errors(tmp_path):
    line = 'mpc_accuracy = { mpc_semi2k = ["breast"] }'
    for new, needle in (('mpc_accuracy = { mpc_aby3 = ["breast"] }',
                         "[quick] mpc_accuracy: unknown key 'mpc_aby3'; allowed: mpc_semi2k, mpc_cheetah"),
                        ('mpc_accuracy = { mpc_semi2k = "breast" }', "mpc_accuracy.mpc_semi2k: expected")):
        with pytest.raises(BenchConfigError, match=re.escape(needle)):
            load_config(True, _quick_copy(tmp_path, line, new))
    batches = "runtime_mpc_batches = {}"
    for new, needle in (("runtime_mpc_batches = { mpc_cheetah = 0 }", "runtime_mpc_batches.mpc_cheetah: expected "
                                                                      "an integer >= 1, got 0"),
                        ("runtime_mpc_batches = { paillier = 3 }", "unknown key 'paillier'; allowed: mpc_semi2k")):
        with pytest.raises(BenchConfigError, match=re.escape(needle)):
            load_config(True, _quick_copy(tmp_path, batches, new))
    methods = '"paillier_dp", "mpc_semi2k"]'
    with pytest.raises(BenchConfigError, match="runtime_methods.*'mpc_semi2k', 'mpc_cheetah', got 'mpc_aby3'"):
        load_config(True, _quick_copy(tmp_path, methods, '"paillier_dp", "mpc_aby3"]'))
    # A dataset no loader knows, named only in mpc_accuracy, and cheetah between three runtime blocks:
    # refused before any cell runs.
    quick = load_config(True)
    with pytest.raises(BenchConfigError, match=r"unknown dataset 'nosuch' -- .*\(named in mpc_accuracy.mpc_cheetah\)"):
        EXPERIMENT.check(replace(quick, mpc_accuracy={"mpc_cheetah": ("nosuch",)}), {})
    with pytest.raises(BenchConfigError, match="mpc_cheetah runs between exactly 2 parties, runtime_features has 3"):
        EXPERIMENT.check(replace(quick, runtime_methods=("mpc_cheetah",), runtime_features=(10, 10, 10)), {})
    # A copy of glm.toml from before the MPC rows (no mpc keys) still loads: no MPC accuracy cell, no cap.
    old = load_config(True, _quick_copy(tmp_path, line + "\n", ""))
    assert old.mpc_accuracy is None and old.mpc_accuracy_methods("breast") == ()
    assert old.mpc_methods() == ("mpc_semi2k",)  # its runtime_methods still name one


@NEEDS_SPU
def test_mpc_runtime_cell_records_cpu_seconds_and_engine_bytes():
    from vflsec.bench.experiments.glm.runtime import _runtime_cell

    rng = np.random.default_rng(0)
    parts = [rng.random((120, 3)) / 3, rng.random((120, 2)) / 2]
    y = rng.integers(0, 2, 120)
    cell = _runtime_cell("mpc_semi2k", parts, y, 120, 1, 40, None, cache={})
    assert cell["mpc_protocol"] == "semi2k" and cell["extrapolated"] is False and cell["measured_batches"] == 3
    assert cell["cpu_seconds"] > 0 and cell["seconds"] > 0
    assert cell["channel_bytes"] > 0 and cell["engine_bytes"] > 0
    assert cell["bytes"] == cell["channel_bytes"] + cell["engine_bytes"]
    # Capped at one engine step: the epoch's three are extrapolated from it, labelled so.
    capped = _runtime_cell("mpc_semi2k", parts, y, 120, 1, 40, 1, cache={})
    assert capped["extrapolated"] is True and capped["measured_batches"] == 1 and capped["measured_rows"] == 40
    assert capped["seconds"] == pytest.approx(3 * capped["measured_seconds"])
    assert capped["cpu_seconds"] == pytest.approx(3 * capped["measured_cpu_seconds"])
    assert capped["engine_bytes"] == pytest.approx(cell["engine_bytes"], rel=0.2)
    plain = _runtime_cell("plain", parts, y, 120, 1, 40, None, cache={})
    assert plain["cpu_seconds"] >= 0 and "engine_bytes" not in plain


def test_cpu_clock_counts_the_worker_processes():
    """Paillier's pool works in child processes, which time.process_time does not see. The child spins 0.6
    CPU-seconds by its own precise clock; /proc counts in scheduler ticks, so the check leaves 0.1 s of slack."""
    import subprocess

    from vflsec.bench.experiments.glm.cpu import CPUClock

    with CPUClock() as clock:
        child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                                  "while time.process_time() - t < 0.6: pass\nprint('spun', flush=True)\n"
                                  "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "spun\n"  # 0.6 CPU-seconds spent, the child still alive
    child.kill()
    child.wait()
    child.stdout.close()
    assert clock.seconds >= 0.5 and clock.scope == "this process and its worker processes"


@NEEDS_SPU
def test_mpc_accuracy_cell_matches_plain_at_plains_configuration():
    rows = accuracy.run_accuracy(SMALL, log=lambda _: None)["rows"]
    ref = {r["method"]: r for r in rows if r["family"] == "reference"}
    mpc, plain = ref["mpc_semi2k"], ref["plain"]
    assert mpc["config"] == plain["config"] and mpc["split_seed"] == 0
    assert abs(mpc["accuracy"] - plain["accuracy"]) <= 0.01
    assert mpc["cpu_seconds"] > 0 and mpc["auc"] is not None
    # the engine's bytes are counted on the wire, beside the Channel's (the input shares and the reveal)
    assert mpc["engine_bytes_counted"] and mpc["bytes"] > 100_000


@NEEDS_SPU
def test_mpc_accuracy_within_a_point_of_plain_on_synthetic_data():
    from vflsec.bench.experiments.glm.fits import fit_scores, plain_job, prepare_split, reference_accuracy
    from vflsec.data import make_synthetic

    # 500 test rows: within 0.01 is at most 5 rows predicted differently (fixed-point rounding near 0).
    prep = prepare_split(make_synthetic(n_samples=1000, features_per_party=(4, 4), seed=3), [4, 4], split_seed=0,
                         test_size=0.5)
    hp = HyperParams(2.0, 2, 250, 1.0)  # 4 engine steps: cheetah's take seconds each
    plain = fit_scores(prep.train, prep.y_train, prep.test, prep.y_test,
                       [plain_job(prep.n_train, 2, hp, split_seed=0)])[0][0]
    for method in ("mpc_semi2k", "mpc_cheetah"):
        acc = reference_accuracy(method, prep, hp, key_bits=2048)[0]
        assert abs(acc - plain) <= 0.01, (method, acc, plain)


@NEEDS_SPU
def test_report_shows_mpc_rows_beside_he_with_their_threat_models(tmp_path):
    from vflsec.bench.experiments.glm.cells import run_cells
    from vflsec.bench.experiments.glm.report import render

    result = {"config": SMALL.as_dict(), "machine": {"cpu": "x", "logical_cores": 2}, "seconds": 1.0}
    run_cells(SMALL, result)
    mpc = [r for r in result["runtime"] if r["method"] == "mpc_semi2k"]
    assert len(mpc) == 2 and all(r["engine_bytes"] > 0 and r["cpu_seconds"] > 0 for r in mpc)
    written = render(result, tmp_path)
    assert {"runtime.png", "tradeoff.png"} <= set(written)
    report = (tmp_path / "report.md").read_text()
    table = next(line for line in report.splitlines() if line.startswith("| mpc_semi2k | ") and " ± " in line)
    assert "trusted dealer" in table and "an experiment setting" in table
    assert "; plain VFL on the same split: " in table  # its like-for-like reference beside it
    assert "| wall s | CPU s |" in report and "MB sent (MPC: channel + engine)" in report
    row = next(line for line in report.splitlines() if line.startswith("| mpc_semi2k | 240 | 1 |"))
    assert re.search(r"\| [0-9.]+ \([0-9.]+ \+ [0-9.]+\) \|$", row), row
    assert "Secret sharing against HE, on the runtime cells both measured in full: mpc_semi2k" in report
    assert "mpc_semi2k costs" in report and "of ckks (median of 2 cells" in report


def test_without_spu_the_quick_path_labels_the_mpc_rows_not_run(tmp_path, monkeypatch, capsys):
    """SPU made unimportable (sys.modules["spu"] = None: find_spec says it is absent and an import
    fails): the [quick] grid's MPC rows say why they did not run; everything else runs."""
    monkeypatch.setitem(sys.modules, "spu", None)
    assert importlib.util.find_spec("spu") is None and not spu_installed()
    quick = load_config(True)
    assert quick.mpc_accuracy_methods("breast") == ("mpc_semi2k",) and "mpc_semi2k" in quick.runtime_methods
    # The [quick] table with its slow parts cut (every HE cell, the spectrum, Figure 2), MPC as shipped.
    config = tmp_path / "quick.toml"
    text = shipped_config_text("glm")
    quick_text = text[text.index("\n[quick]\n"):]
    for old, new in (("split_seeds = 2", "split_seeds = 1"), ("noise_draws = 2", "noise_draws = 1"),
                     ("epsilons = [0.01, 0.1, 1.0, 10.0, 100.0]", "epsilons = [1.0]"),
                     ('he_accuracy = { paillier = ["breast"], ckks = ["breast"] }', "he_accuracy = {}"),
                     ("figure2 = true", "figure2 = false"), ("grid_epochs = [5, 10, 15]", "grid_epochs = [5]"),
                     ("grid_k = [0.1, 0.3, 1.0, 3.0, 10.0]", "grid_k = [1.0]"),
                     ('"ckks", "paillier", "ckks_dp", "paillier_dp", ', ""),
                     ("spectrum_epsilons = [0.1, 1.0, 10.0]", "spectrum_epsilons = []"),
                     ('he_dp_accuracy = { paillier_dp = ["breast"], ckks_dp = ["breast"] }', "he_dp_accuracy = {}"),
                     ("opacus_epsilons = [1.0]", "opacus_epsilons = []")):
        assert old in quick_text, old
        quick_text = quick_text.replace(old, new, 1)
    config.write_text(quick_text)
    runner.run(EXPERIMENT, {"quick": True, "config": config, "out": tmp_path / "out"})
    capsys.readouterr()
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"| mpc_semi2k | {NOT_INSTALLED} | secret-sharing MPC (SPU semi2k)" in report
    assert f"| mpc_semi2k | - | - | {NOT_INSTALLED} |" in report
    assert "Secret sharing against HE" not in report and "| plain | 1000 | 1 |" in report


def test_equal_protection_compares_he_and_mpc_per_dataset_and_over_the_cited_links():
    from vflsec.bench.experiments.glm.report import equal_protection

    def fit(dataset, method, acc, cpu, config="b=256"):
        return {"dataset": dataset, "family": "reference", "method": method, "split_seed": 0, "accuracy": acc,
                "cpu_seconds": cpu, "config": config}

    rows = [fit("adult", "paillier", 0.841, 400.0), fit("adult", "ckks", 0.841, 60.0),
            fit("adult", "mpc_semi2k", 0.839, 98.0), fit("adult", "mpc_cheetah", 0.840, 2000.0),
            fit("breast", "paillier", 0.974, 20.0, "b=64"), fit("breast", "mpc_semi2k", 0.965, 6.0, "b=32"),
            fit("credit", "mpc_semi2k", 0.8, 50.0)]  # no HE fit on credit: no comparison
    rows.append({**fit("adult", "mpc_semi2k", 0.5, 1.0), "split_seed": 1})  # only split 0 counts

    def link(method, name, seconds, rounds=10):
        return {"method": method, "link": name, "seconds": seconds, "rounds": rounds}

    links = {"source": "net.json", "job": {"features_per_party": [35, 73], "rows": 10500, "batch_size": 3200},
             "links": [link("paillier", "loopback", 13.5, 27), link("paillier", "wan", 15.7, 27),
                       link("mpc_semi2k", "loopback", 4.0, 300), link("mpc_semi2k", "wan", 30.0, 300)],
             "calibration": {"mpc_semi2k": {"model": "engine", "engine_round_trips": 1300.0, "fitted_on": "wan"}}}
    adult, breast, over = equal_protection(rows, links)
    assert adult.startswith("**adult**") and "mpc_semi2k 0.839 in 98 CPU-s" in adult
    assert "Cheapest: ckks; the cheapest MPC (mpc_semi2k) takes 1.63x the CPU of the cheapest HE (ckks)." in adult
    assert "Configurations differ" not in adult and "Configurations differ" in breast
    assert "loopback 4 s (paillier 13.5 s); wan 30 s (paillier 15.7 s)" in over
    assert "Fastest per link: loopback mpc_semi2k, wan paillier. mpc_semi2k is faster than paillier on loopback." \
        in over
    assert "about 1300 sequential round trips" in over
    assert equal_protection(rows[-3:], None) == []
