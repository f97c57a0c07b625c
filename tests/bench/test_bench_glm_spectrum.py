"""``vflsec bench glm``'s DP spectrum (issue 26): the central-DP ceiling, HDP-VFL and HE+DP at the
same (epsilon, delta), each configuration selected on other data; the encrypted HE+DP rows against
their flow in the clear; the Opacus rows; the report's answers following from the rows."""
from dataclasses import replace

import numpy as np
import pytest

from vflsec.bench.experiments.glm.accuracy import _load, _parties
from vflsec.bench.experiments.glm.fits import prepare_split
from vflsec.bench.experiments.glm.grid import GLMBenchConfig
from vflsec.bench.experiments.glm.spectrum import (
    Candidate,
    central_candidates,
    he_dp_candidates,
    run_spectrum,
    select,
)
from vflsec.bench.experiments.glm.spectrum_report import (
    he_dp_time_ratios,
    spectrum_conclusion,
    spectrum_measurements,
    spectrum_section,
)
from vflsec.bench.experiments.glm.summary import summarize

SMALL = GLMBenchConfig.quick_run(split_seeds=1, noise_draws=2, spectrum_epsilons=(1.0, 10.0),
                                 spectrum_deltas=(1e-5,), central_sgd_epochs=(5,), central_sgd_lr=(0.5,),
                                 central_output_lam_scales=(1.0,), central_objective_lams=(1e-3,),
                                 he_dp_epochs=(2,), he_dp_k=(3.0,), he_dp_accuracy={}, mpc_dp_accuracy={},
                                 opacus_epsilons=(), cv_folds=2)


def _run(config):
    ds = _load("breast", None, None)
    preps = {"breast": [prepare_split(ds, _parties("breast", ds), split_seed=s, test_size=config.test_size)
                        for s in range(config.split_seeds)]}
    rows, result = [], {}
    run_spectrum(config, preps, rows, result, log=lambda _: None)
    return rows, result


@pytest.fixture(scope="module")
def small_run():
    return _run(SMALL)


def test_candidates_come_from_the_configuration():
    config = GLMBenchConfig()
    central = central_candidates(config)
    methods = [c.method for c in central]
    assert methods.count("dp_sgd") == (len(config.central_sgd_sampling_rates) * len(config.central_sgd_epochs)
                                       * len(config.central_sgd_lr))
    assert methods.count("output_perturbation") == len(config.central_output_lam_scales)
    assert methods.count("objective_perturbation") == len(config.central_objective_lams)
    he_dp = he_dp_candidates(config)
    assert len(he_dp) == len(config.he_dp_batch_sizes) * len(config.he_dp_epochs) * len(config.he_dp_k)
    assert Candidate("x", (("a", 1.0), ("b", 2))).label() == "x a=1 b=2"


def test_selection_never_uses_the_evaluated_dataset_and_ranks_refused_candidates_last():
    pool = {"a": np.array([[0.9], [0.1], [0.5]]), "b": np.array([[0.2], [np.nan], [0.6]]),
            "c": np.array([[0.3], [np.nan], [0.7]])}
    order, names = select(pool, "a")
    assert names == ["b", "c"] and list(order[:, 0]) == [2, 0, 1]  # a's own 0.9 is not looked at
    with pytest.raises(ValueError, match="no other dataset"):
        select({"a": pool["a"]}, "a")


def test_every_method_has_rows_at_every_budget_within_its_epsilon(small_run):
    rows, result = small_run
    methods = {r["method"] for r in rows}
    assert methods == {"central_dp", "hdp", "taylor_dp"}
    for method in methods:
        budgets = {(r["epsilon"], r["delta"]) for r in rows if r["method"] == method}
        assert budgets == {(1.0, 1e-5), (10.0, 1e-5)}
        assert len([r for r in rows if r["method"] == method]) == 2 * SMALL.noise_draws
    for r in rows:
        assert r["family"] == "spectrum" and r["valid_dp"] and r["noise"] == "seeded (experiment setting)"
        if r.get("epsilon_spent") is not None:
            assert r["epsilon_spent"] <= r["epsilon"] * (1 + 1e-9)
    assert result["spectrum"]["selected"]["breast"]["selected_on"] == ["synthetic"]
    # The ceiling learns on Breast at epsilon 10 (majority rate 0.63).
    ceiling = [r["accuracy"] for r in rows if r["method"] == "central_dp" and r["epsilon"] == 10.0]
    assert np.mean(ceiling) > 0.85


@pytest.mark.slow  # a second run of the small spectrum
def test_the_same_seed_reproduces_the_spectrum(small_run):
    again, _ = _run(SMALL)
    assert [r["accuracy"] for r in again] == [r["accuracy"] for r in small_run[0]]


@pytest.mark.slow  # Paillier and CKKS training on Breast, and Opacus: about half a minute
def test_encrypted_he_dp_matches_its_flow_in_the_clear_and_opacus_rows_run():
    pytest.importorskip("phe")
    pytest.importorskip("tenseal")
    pytest.importorskip("opacus")
    config = replace(SMALL, noise_draws=1, spectrum_epsilons=(1.0,), he_split_seeds=1,
                     he_dp_accuracy={"paillier_dp": ("breast",), "ckks_dp": ("breast",)},
                     he_dp_accuracy_epsilons={"paillier_dp": (1.0,), "ckks_dp": (1.0,)}, opacus_epsilons=(1.0,))
    rows, _ = _run(config)
    twin = next(r for r in rows if r["method"] == "taylor_dp" and r["noise_draw"] == 0)
    n_test = 114
    for method in ("paillier_dp", "ckks_dp"):
        row = next(r for r in rows if r["method"] == method)
        # Same configuration and noise seed: the encryption changes at most a couple of test rows.
        assert row["config"] == twin["config"]
        assert abs(row["accuracy"] - twin["accuracy"]) <= 2 / n_test + 1e-12, (method, row["accuracy"], twin)
        assert row["epsilon_spent"] <= 1.0 and row["epoch_seconds"] > 0
    opacus = next(r for r in rows if r["method"] == "opacus_dp_sgd")
    ours = next(r for r in rows if r["method"] == "central_dp_sgd_add_remove")
    assert opacus["accuracy"] > 0.8 and opacus["epsilon_spent"] <= 1.0 + 1e-6
    # Opacus' own calibration and vflsec's under the same (add/remove) relation agree within 5%.
    assert opacus["noise_multiplier"] == pytest.approx(ours["noise_multiplier"], rel=0.05)
    replace_one = next(r for r in rows if r["method"] == "central_dp_sgd")
    assert replace_one["noise_multiplier"] > 1.3 * ours["noise_multiplier"]


def _row(method, eps, acc, *, delta=1e-5, split=0, draw=0, **extra):
    return {"dataset": "d", "family": "spectrum", "method": method, "calibration": None, "epsilon": eps,
            "delta": delta, "split_seed": split, "noise_draw": draw, "accuracy": acc, **extra}


def _ref(method, acc):
    return {"dataset": "d", "family": "reference", "method": method, "calibration": None, "epsilon": None,
            "accuracy": acc}


def test_the_conclusion_follows_from_the_numbers():
    rows = [_ref("single_party", 0.80), _ref("majority", 0.7), _ref("plain", 0.85)]
    for draw, jitter in enumerate((-0.002, 0.002)):
        rows += [_row("central_dp", 0.1, 0.78 + jitter, draw=draw), _row("central_dp", 1.0, 0.83 + jitter, draw=draw),
                 _row("hdp", 0.1, 0.70 + jitter, draw=draw), _row("hdp", 1.0, 0.75 + jitter, draw=draw),
                 _row("taylor_dp", 0.1, 0.76 + jitter, draw=draw), _row("taylor_dp", 1.0, 0.815 + jitter, draw=draw)]
    rows.append(_row("paillier_dp", 1.0, 0.81, epoch_seconds=3.0, config={}))
    summary = summarize(rows)
    runtime = [{"method": m, "n": 100, "epochs": 1, "seconds": s, "bytes": 1, "measured_batches": 3}
               for m, s in (("paillier", 10.0), ("paillier_dp", 10.5), ("ckks", 2.0), ("ckks_dp", 2.0))]
    assert he_dp_time_ratios(runtime) == {"paillier_dp": (1.05, 1), "ckks_dp": (1.0, 1)}
    (text,) = spectrum_conclusion(summary, runtime)
    assert "the first ε at which a DP method beats it is 1 (central-DP ceiling 0.830)" in text
    assert "the first vertical protocol to beat it is HE+DP (taylor_dp: its flow in the clear) at ε = 1" in text
    assert "-8.0 at ε = 0.1 (0.700 vs 0.780), -8.0 at ε = 1 (0.750 vs 0.830)" in text
    assert "HE+DP at ε = 1 (δ = 1e-05) reaches 0.810 (paillier_dp), 2.0 points below" in text
    assert "It is not within 1 point" in text
    values, _ = spectrum_measurements(summary, runtime)
    assert values["glm.he_dp_gap_points.d"] == pytest.approx(2.0)
    section = "\n".join(spectrum_section(summary, {}, runtime))
    assert "| 1e-05 | 1 | 0.830 ± 0.002 (n=2) | 0.750 ± 0.002 (n=2) |" in section
    assert "epoch time over the same protocol without DP" in section and "**holds**" in section


def test_no_method_beats_the_active_party_when_none_does():
    rows = [_ref("single_party", 0.9)] + [_row(m, e, 0.85) for m in ("central_dp", "hdp", "taylor_dp")
                                          for e in (1.0, 10.0)]
    (text,) = spectrum_conclusion(summarize(rows), [])
    assert "no DP method beats the active party alone at ε <= 10; no vertical DP protocol does" in text
