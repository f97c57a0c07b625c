"""The DP spectrum's MPC+DP rows (protection "mpc_dp": the ceiling's DP-SGD inside SPU): their
configuration keys, a real cell on Breast at the ceiling's own DP-SGD selection, the report's column,
configuration and the sentence naming the most accurate vertical protocol per epsilon, and a run
without SPU (the ``mpc`` extra) labelling the cell "not run"."""
import math
import re
import sys
from dataclasses import replace

import numpy as np
import pytest

from vflsec.bench.errors import BenchConfigError
from vflsec.bench.experiments.glm.accuracy import _load, _parties
from vflsec.bench.experiments.glm.fits import prepare_split
from vflsec.bench.experiments.glm.grid import GLMBenchConfig, load_config
from vflsec.bench.experiments.glm.mpc_cells import NOT_INSTALLED, engine_protocol, spu_installed
from vflsec.bench.experiments.glm.spectrum import central_candidates, run_spectrum, select, selected_dp_sgd
from vflsec.bench.experiments.glm.spectrum_report import spectrum_conclusion, spectrum_section
from vflsec.bench.experiments.glm.summary import summarize

NEEDS_SPU = pytest.mark.skipif(not spu_installed(), reason="needs the mpc extra (SPU)")

# Breast, one split and one noise draw, the spectrum at epsilon 1 only, a one-configuration HDP-VFL and HE+DP
# grid and two ceiling candidates per family kind; MPC+DP semi2k at epsilon 1 (5 epochs at q = 0.0625: 79
# engine steps, a few seconds).
TINY = GLMBenchConfig.quick_run(split_seeds=1, noise_draws=1, spectrum_epsilons=(1.0,), spectrum_deltas=(1e-5,),
                                grid_batch_sizes=(3200,), grid_epochs=(5,), grid_k=(1.0,),
                                central_sgd_sampling_rates=(0.0625,), central_sgd_epochs=(5,),
                                central_sgd_lr=(0.5, 2.0), central_output_lam_scales=(1.0,),
                                central_objective_lams=(1e-3,), he_dp_batch_sizes=(1024,), he_dp_epochs=(2,),
                                he_dp_k=(3.0,), he_dp_accuracy={}, opacus_epsilons=(), cv_folds=2,
                                mpc_dp_accuracy={"mpc_dp_semi2k": ("breast",)},
                                mpc_dp_accuracy_epsilons={"mpc_dp_semi2k": (1.0,)})


def _breast():
    ds = _load("breast", None, None)
    return prepare_split(ds, _parties("breast", ds), split_seed=0, test_size=TINY.test_size)


def _run(config, prep):
    rows, result = [], {}
    run_spectrum(config, {"breast": [prep]}, rows, result, log=lambda _: None)
    return rows, result


def test_mpc_dp_keys_are_validated_and_an_old_copy_has_no_cells(tmp_path):
    from vflsec.bench.config import shipped_config_text

    text = shipped_config_text("glm")
    quick = text.index("\n[quick]\n")
    line = 'mpc_dp_accuracy = { mpc_dp_semi2k = ["breast"] }'
    assert line in text[quick:]
    path = tmp_path / "glm.toml"
    for new, needle in (('mpc_dp_accuracy = { mpc_semi2k = ["breast"] }',
                         "[quick] mpc_dp_accuracy: unknown key 'mpc_semi2k'; allowed: mpc_dp_semi2k, mpc_dp_cheetah"),
                        ('mpc_dp_accuracy = { mpc_dp_semi2k = "breast" }', "mpc_dp_accuracy.mpc_dp_semi2k: expected")):
        path.write_text(text[:quick] + text[quick:].replace(line, new, 1))
        with pytest.raises(BenchConfigError, match=re.escape(needle)):
            load_config(True, path)
    epsilons = "mpc_dp_accuracy_epsilons = { mpc_dp_semi2k = [1.0] }"
    path.write_text(text[:quick] + text[quick:].replace(epsilons, epsilons.replace("1.0", "0.0"), 1))
    with pytest.raises(BenchConfigError, match="mpc_dp_accuracy_epsilons.mpc_dp_semi2k"):
        load_config(True, path)
    # A copy of glm.toml from before these rows (no mpc_dp keys) still loads, with no MPC+DP cell.
    path.write_text(text[:quick] + text[quick:].replace(line + "\n", "", 1).replace(epsilons + "\n", "", 1))
    old = load_config(True, path)
    assert old.mpc_dp_accuracy is None and old.mpc_dp_accuracy_methods("breast", 1.0) == ()
    shipped = load_config(False)
    assert shipped.mpc_dp_accuracy_methods("breast", 1.0) == ("mpc_dp_semi2k",)
    assert shipped.mpc_dp_accuracy_methods("credit", 1.0) == ("mpc_dp_semi2k",)
    assert shipped.mpc_dp_accuracy_methods("adult", 0.1) == ()
    assert engine_protocol("mpc_dp_cheetah") == "cheetah" and engine_protocol("mpc_semi2k") == "semi2k"
    with pytest.raises(ValueError, match="is not an MPC method"):
        engine_protocol("mpc_dp_aby3")


@pytest.fixture(scope="module")
def mpc_dp_run():
    prep = _breast()
    return prep, *_run(TINY, prep)


@NEEDS_SPU
def test_mpc_dp_cell_runs_the_ceilings_dp_sgd_selection_and_learns(mpc_dp_run):
    prep, rows, result = mpc_dp_run
    (row,) = [r for r in rows if r["method"] == "mpc_dp_semi2k"]
    assert (row["epsilon"], row["delta"], row["split_seed"], row["noise_draw"]) == (1.0, 1e-5, 0, 0)
    # The DP-SGD candidate the ceiling's own CV ranking puts first (here chosen among two learning rates).
    pool = {name: np.asarray(scores, dtype=float) for name, scores in result["spectrum"]["cv"]["central_dp"].items()}
    order, _ = select(pool, "breast")
    top = selected_dp_sgd(central_candidates(TINY), order[:, 0])[0]
    assert row["config"] == {**top.as_dict(), "batch_size": math.ceil(top.as_dict()["sampling_rate"] * prep.n_train)}
    assert result["spectrum"]["selected"]["breast"]["mpc_dp"]["1/1e-05"].startswith(top.label())
    majority = max(np.mean(prep.y_test == c) for c in np.unique(prep.y_train))
    assert row["accuracy"] > majority + 0.05, (row["accuracy"], majority)
    assert 0.5 < row["auc"] <= 1.0
    assert row["epsilon_spent"] <= 1.0 and row["mpc_protocol"] == "semi2k" and row["noise_shares"] == 2
    assert row["steps"] == math.ceil(5 / row["sampling_rate"]) and row["sampling_rate"] >= 0.0625
    assert row["seconds"] > 0 and row["cpu_seconds"] > 0


@NEEDS_SPU
def test_report_shows_the_mpc_dp_column_configuration_and_sentence(mpc_dp_run, tmp_path):
    from vflsec.bench.common import pyplot
    from vflsec.bench.experiments.glm.plots import _plot_spectrum

    _, rows, result = mpc_dp_run
    summary = summarize(rows)
    section = "\n".join(spectrum_section(summary, result["spectrum"]["selected"], []))
    header = next(line for line in section.splitlines() if line.startswith("| δ | ε |"))
    assert header.endswith("| MPC+DP, semi2k (mpc_dp) |"), header
    row = next(r for r in rows if r["method"] == "mpc_dp_semi2k")
    assert re.search(rf"^\| 1e-05 \| 1 \| .* \| {row['accuracy']:.3f} ± 0\.000 \(n=1\) \|$", section, re.M)
    assert "| ε/δ | central-DP ceiling | HDP-VFL | HE+DP | MPC+DP |" in section
    assert f"{row['config']['batch_size']}" in section and "MPC+DP runs the ceiling's best-ranked DP-SGD" in section
    assert "trusted dealer" in section  # semi2k's threat model
    (text,) = spectrum_conclusion(summary, [])
    ceiling = np.mean([r["accuracy"] for r in rows if r["method"] == "central_dp"])
    gap = (ceiling - row["accuracy"]) * 100
    assert "The most accurate vertical DP protocol at δ = 1e-05 (HDP-VFL, HE+DP, MPC+DP" in text
    assert (f"MPC+DP (semi2k) {abs(gap):.1f} points {'below' if gap >= 0 else 'above'} the ceiling's "
            f"{ceiling:.3f}, {row['seconds']:.0f} s per fit") in text
    # The plot's spectrum panel has an MPC+DP point.
    plt = pyplot()
    fig, ax = plt.subplots()
    _plot_spectrum(ax, "breast", summary["breast"])
    assert any(label.startswith("MPC+DP semi2k, δ=1e-05") for label in ax.get_legend_handles_labels()[1])
    plt.close(fig)


def test_without_spu_the_mpc_dp_cell_is_not_run(monkeypatch):
    """SPU made unimportable (the availability check the MPC cells use then says it is absent): the cell
    is a row labelled not run and the report's column says so; everything else runs."""
    monkeypatch.setitem(sys.modules, "spu", None)
    assert not spu_installed()
    config = replace(TINY, central_sgd_lr=(0.5,))
    rows, result = _run(config, _breast())
    (row,) = [r for r in rows if r["method"] == "mpc_dp_semi2k"]
    assert row["not_run"] == NOT_INSTALLED and row["accuracy"] is None
    assert {r["method"] for r in rows} == {"central_dp", "hdp", "taylor_dp", "mpc_dp_semi2k"}
    summary = summarize(rows)
    section = "\n".join(spectrum_section(summary, result["spectrum"]["selected"], []))
    table_row = next(line for line in section.splitlines() if line.startswith("| 1e-05 | 1 |"))
    assert table_row.endswith(f"| {NOT_INSTALLED} |"), table_row
    (text,) = spectrum_conclusion(summary, [])
    assert "most accurate vertical DP protocol at δ = 1e-05" in text and f"[MPC+DP (semi2k) {NOT_INSTALLED}]" in text


def _row(method, eps, acc, **extra):
    return {"dataset": "d", "family": "spectrum", "method": method, "calibration": None, "epsilon": eps,
            "delta": 1e-5, "split_seed": 0, "noise_draw": 0, "accuracy": acc, **extra}


def test_the_most_accurate_vertical_protocol_follows_from_the_numbers():
    rows = [{"dataset": "d", "family": "reference", "method": "single_party", "calibration": None,
             "epsilon": None, "accuracy": 0.8}]
    for eps, ceiling, hdp, taylor in ((0.1, 0.80, 0.70, 0.75), (1.0, 0.90, 0.84, 0.85), (10.0, 0.95, 0.90, 0.93)):
        rows += [_row("central_dp", eps, ceiling), _row("hdp", eps, hdp), _row("taylor_dp", eps, taylor)]
    rows += [_row("mpc_dp_semi2k", 0.1, 0.78, seconds=12.4, cpu_seconds=20.2, config={}),
             _row("mpc_dp_semi2k", 1.0, 0.86, seconds=30.0, cpu_seconds=41.0, config={}),
             _row("mpc_dp_cheetah", 1.0, 0.88, seconds=300.0, config={}),
             _row("mpc_dp_cheetah", 0.1, None, not_run=NOT_INSTALLED)]
    summary = summarize(rows)
    (text,) = spectrum_conclusion(summary, [])
    assert ("at ε = 0.1, MPC+DP (semi2k) 0.780, ahead of HE+DP (taylor_dp) 0.750 and HDP-VFL 0.700 "
            "[MPC+DP (semi2k) 2.0 points below the ceiling's 0.800, 12 s per fit (20 CPU s); "
            f"MPC+DP (cheetah) {NOT_INSTALLED}]") in text
    assert ("at ε = 1, MPC+DP (cheetah) 0.880, ahead of MPC+DP (semi2k) 0.860, HE+DP (taylor_dp) 0.850 and "
            "HDP-VFL 0.840 [MPC+DP (semi2k) 4.0 points below the ceiling's 0.900, 30 s per fit (41 CPU s); "
            "MPC+DP (cheetah) 2.0 points below the ceiling's 0.900, 300 s per fit]") in text
    assert "at ε = 10, HE+DP (taylor_dp) 0.930, ahead of HDP-VFL 0.900 [MPC+DP not run at this ε]." in text
    section = "\n".join(spectrum_section(summary, {}, []))
    assert section.count("| MPC+DP, semi2k (mpc_dp) | MPC+DP, Cheetah (mpc_dp) |") == 1
    assert f"| 0.780 ± 0.000 (n=1) | {NOT_INSTALLED} |" in section  # cheetah at 0.1: not run, and why
    assert "| 0.930 ± 0.000 (n=1) | not run | not run |" in section  # no MPC+DP cell at 10
