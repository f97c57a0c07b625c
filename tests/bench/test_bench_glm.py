"""``vflsec bench glm`` on built-in data: the experiment description, the
headline selection rule, the references on every table, reproducibility,
strict JSON, and a run's contents decided by its configuration alone (which
HE accuracy cells run, how many batches an HE runtime cell measures), never
by a time estimate. (HE protocols are covered by test_glm_he.py.)"""
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from vflsec.bench import runner
from vflsec.bench.errors import BenchConfigError
from vflsec.bench.experiments.glm import EXPERIMENT, accuracy
from vflsec.bench.experiments.glm.accuracy import REFERENCE_METHODS, search_epsilon, select_headline
from vflsec.bench.experiments.glm.grid import PAPER_GRID, WIDE_GRID, GLMBenchConfig, cell_seed

ROOT = Path(__file__).resolve().parents[2]
TINY = GLMBenchConfig.quick_run(split_seeds=1, noise_draws=1, epsilons=(0.1, 1.0, 10.0), he_accuracy={},
                                mpc_accuracy={}, runtime_sizes=(400,), runtime_epochs=(1, 2), runtime_epochs_n=400,
                                runtime_batch_size=100, runtime_he_batches={}, spectrum_epsilons=(1.0,),
                                spectrum_deltas=(1e-5,), he_dp_accuracy={}, mpc_dp_accuracy={}, opacus_epsilons=())


def test_grids_and_seeds():
    assert len(WIDE_GRID) == 45 and set(PAPER_GRID) <= set(WIDE_GRID)
    assert {h.k for h in PAPER_GRID} == {0.1, 0.3, 1.0} and {h.batch_size for h in PAPER_GRID} == {3200}
    assert max(h.lr for h in WIDE_GRID) < 2 / (2 * 0.25 + 0.001)  # within the two-party DP limit
    assert cell_seed(0, "a", 1, 0.5) == cell_seed(0, "a", 1, 0.5) != cell_seed(0, "a", 1, 0.25)
    assert cell_seed(None, "a") is None
    assert GLMBenchConfig().classic_epsilons == (0.001, 0.01, 0.1)


def test_headline_is_never_selected_on_the_evaluated_dataset():
    cv = {"a": np.zeros((3, 2)), "b": np.zeros((3, 2)), "c": np.zeros((3, 2))}
    cv["a"][0] = 1.0  # best on a itself
    cv["b"][2] = 0.9
    cv["c"][2] = 0.8
    index, pool = select_headline(cv, "a", WIDE_GRID[:3])
    assert index == 2 and pool == ["b", "c"]
    with pytest.raises(ValueError, match="no other dataset"):
        select_headline({"a": cv["a"]}, "a", WIDE_GRID[:3])


def test_search_epsilon_composes_the_runs():
    one = search_epsilon(1.0, 1)
    assert one == pytest.approx(1.0, rel=1e-3)
    assert search_epsilon(1.0, 4) > 1.9 and search_epsilon(1.0, 181) > search_epsilon(1.0, 45)


@pytest.fixture(scope="module")
def tiny_run():
    return accuracy.run_accuracy(TINY)


def test_every_reference_and_family_is_present(tiny_run):
    rows = tiny_run["rows"]
    methods = {r["method"] for r in rows if r["family"] == "reference"}
    assert set(REFERENCE_METHODS) - {"paillier", "ckks", "mpc_semi2k", "mpc_cheetah"} <= methods
    assert any("majority" in m for m in methods) and any("centralized" in m for m in methods)
    assert any("single_party" in m for m in methods)
    families = {r["family"] for r in rows}
    assert families == {"reference", "headline", "tuned_paper_grid", "tuned_wide_grid", "private_selection",
                        "figure2", "spectrum"}
    # The headline was selected on other data (the built-in synthetic set in a one-dataset run).
    assert tiny_run["headline"]["breast"]["selected_on"] == ["synthetic"]
    # Classic calibration only where it is an (epsilon, delta) guarantee.
    classic = [r for r in rows if r["calibration"] == "classic"]
    assert classic and all(r["epsilon"] < 1 and r["valid_dp"] for r in classic)
    tuned = [r for r in rows if r["family"].startswith("tuned")]
    assert all(r["search_epsilon"] > r["epsilon"] for r in tuned)
    assert all(r["noise"] == "seeded (experiment setting)" for r in rows if r["method"] == "hdp")


def test_plain_vfl_learns_like_centralized_and_dp_shows_a_tradeoff(tiny_run):
    rows = tiny_run["rows"]
    ref = {r["method"]: r["accuracy"] for r in rows if r["family"] == "reference"}
    assert ref["plain"] >= ref["majority"] + 0.2
    assert ref["plain"] >= ref["centralized_sklearn"] - 0.03
    hdp = [r["accuracy"] for r in rows if r["family"] == "headline" and r["calibration"] == "analytic"]
    # On Breast the active party's features carry most of the signal, so HDP-VFL degrades towards
    # the active party alone rather than to chance; the cost of DP shows against plain VFL.
    assert np.mean(hdp) < ref["plain"] and min(hdp) > ref["majority"]


@pytest.mark.slow  # two full tiny runs, or a subprocess interrupted mid-run: seconds
def test_same_seed_reproduces_and_os_entropy_does_not():
    config = replace(TINY, epsilons=(1.0,), figure2=False, spectrum_epsilons=())
    a = [r["accuracy"] for r in accuracy.run_accuracy(config)["rows"]]
    b = [r["accuracy"] for r in accuracy.run_accuracy(config)["rows"]]
    assert a == b
    fresh = replace(config, seed=None)
    c = accuracy.run_accuracy(fresh)["rows"]
    assert all(r["noise"] == "OS-entropy CSPRNG" for r in c if r["method"] == "hdp")


def test_os_entropy_makes_the_seed_none_and_excludes_seed():
    grid = runner.load_grid(EXPERIMENT, {"quick": True, "os_entropy": True})
    assert grid.seed is None and EXPERIMENT.seed_of(grid) is None
    assert runner.load_grid(EXPERIMENT, {"quick": True, "seed": 7}).seed == 7
    with pytest.raises(BenchConfigError, match="--seed and --os-entropy exclude each other"):
        runner.load_grid(EXPERIMENT, {"quick": True, "seed": 7, "os_entropy": True})


def test_report_plots_and_strict_json(tiny_run, tmp_path):
    from vflsec.bench.experiments.glm.report import render
    from vflsec.bench.experiments.glm.runtime import run_runtime

    rt = run_runtime([], sizes=[400], epoch_counts=[1, 2], epochs_n=400, features=[5, 7],
                     methods=["plain", "hdp"], batch_size=100, he_batches={})
    full = {"machine": {"cpu": "x", "logical_cores": 2}, "load": {"start": {"loadavg": [0.1, 0.1, 0.1]},
                                                                  "end": {"loadavg": [0.2, 0.1, 0.1]}},
            "config": dict(TINY.as_dict(), runtime_epochs_n=400), "accuracy": tiny_run, "runtime": rt,
            "seconds": 1.0}
    runner.write_results(tmp_path / "results.json", full)
    written = render(full, tmp_path)
    report = (tmp_path / "report.md").read_text()
    for needle in ("## breast", "majority", "single_party", "centralized_sklearn", "ε excludes hyperparameter search",
                   "Figure 2", "## The paper's claims", "## Conclusion", "not covered by ε",
                   "0.10/0.10/0.10 at the start, 0.20/0.10/0.10 at the end",
                   "| HDP-VFL's runtime is about that of non-private VFL", "papers/hdp_vfl.toml"):
        assert needle in report, needle
    text = (tmp_path / "results.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    pngs = ["accuracy_vs_epsilon.png", "figure2.png", "runtime.png", "tradeoff.png"]
    assert written == ["report.md"] + pngs
    for png in pngs:
        assert (tmp_path / png).stat().st_size > 5000
    assert "![DP vs HE trade-off](tradeoff.png)" in report


def test_claim_thresholds_are_data_read_from_the_paper_file(tiny_run, monkeypatch):
    """The verdicts follow papers/hdp_vfl.toml: moving a claim's threshold flips its verdict
    without touching code."""
    from vflsec.bench.claims import Claim
    from vflsec.bench.experiments.glm import verdicts
    from vflsec.bench.experiments.glm.summary import summarize

    summary = summarize(tiny_run["rows"])
    measured, _ = verdicts.accuracy_measurements(summary["breast"], TINY.epsilons)
    gap = measured["accuracy.hdp_minus_plain.eps10"]
    assert gap is not None and gap < 0
    text = "\n".join(verdicts.claims_section(summary, TINY.epsilons))
    for threshold, word in ((gap + 0.5, "holds"), (gap - 0.5, "does not hold")):
        claim = Claim("c", "papers/x.toml", "close at 10", "accuracy.hdp_minus_plain.eps10", "<=", threshold)
        monkeypatch.setattr(verdicts, "load_claims", lambda paper, c=claim: (c,))
        lines = "\n".join(verdicts.claims_section(summary, TINY.epsilons)).splitlines()
        line = next(x for x in lines if x.startswith("| close at 10"))
        assert line.endswith(f"**{word}** |"), line
    assert "close to lossless at ε = 10" in text


def test_he_accuracy_cells_are_the_configured_ones_and_others_are_labelled():
    """A dataset not named in he_accuracy gets no HE cell, whatever the machine's speed; the
    report says so. Old results' time-budget skips still render with their estimate."""
    from vflsec.bench.experiments.glm.report import render_report

    config = replace(TINY, epsilons=(1.0,), he_accuracy={"ckks": ("credit",)}, figure2=False)
    rows = accuracy.run_accuracy(config)["rows"]
    assert not [r for r in rows if r["method"] in ("paillier", "ckks")]
    report = render_report({"config": config.as_dict(), "accuracy": {"rows": rows}, "runtime": []})
    assert "| ckks | not run (not configured: he_accuracy has no ckks cell on breast) | taylor gives its accuracy |" \
        in report
    old = dict(rows[0], method="paillier", accuracy=None, skipped=True, estimated_seconds=180.0)
    old_config = {k: v for k, v in config.as_dict().items() if k != "he_accuracy"}
    report = render_report({"config": old_config, "accuracy": {"rows": rows + [old]}, "runtime": []})
    assert "| paillier | not run (estimated 3.0 min, over the budget) |" in report


def test_a_configured_he_accuracy_cell_runs(tmp_path):
    """The configured cell is measured (on a 60-row subsample of Breast, to keep it short)."""
    config = replace(TINY, epsilons=(1.0,), he_accuracy={"paillier": ("breast",)}, figure2=False, max_rows=60,
                     grid_epochs=(5,), grid_k=(1.0,))
    rows = accuracy.run_accuracy(config)["rows"]
    paillier = [r for r in rows if r["method"] == "paillier"]
    taylor = [r for r in rows if r["method"] == "taylor"]
    assert len(paillier) == 1 and paillier[0]["accuracy"] is not None and paillier[0]["key_bits"] == 2048
    assert paillier[0]["accuracy"] == pytest.approx(taylor[0]["accuracy"], abs=0.05)
    # its cost beside the MPC cells' (the Conclusion's equal-protection paragraph)
    assert paillier[0]["cpu_seconds"] > 0 and paillier[0]["bytes"] > 0 and not paillier[0]["engine_bytes_counted"]


def test_cli_errors_are_one_line_with_exit_code_2(capsys):
    from vflsec.cli import main

    for argv, needle in ((["bench", "glm", "--datasets", "nosuch"], "unknown dataset"),
                         (["bench", "glm", "--split-seeds", "0"], "split_seeds: expected an integer >= 1, got 0"),
                         (["bench", "glm", "--datasets", "credit", "--data-dir", "/nonexistent"], "--data-dir"),
                         (["bench", "glm", "--he-budget", "5"], "unrecognized arguments: --he-budget"),
                         (["bench", "glm", "--he-accuracy-budget", "5"], "unrecognized arguments")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
    with pytest.raises(SystemExit) as exc:  # no prefix matching: --seed is not --seeds
        main(["bench", "glm", "--see", "1"])
    assert exc.value.code == 2


def test_he_runtime_cells_measure_the_configured_batches_as_the_committed_run_did():
    """The shipped [full] rule (Paillier at most 14 batches, CKKS in full) measures the batches the
    committed run measured under its old time budget, cell for cell."""
    from vflsec.bench.experiments.glm.runtime import he_measurement

    full = GLMBenchConfig()
    committed = json.loads((ROOT / "benchmarks" / "results" / "glm" / "results.json").read_text())["runtime"]
    he_rows = [r for r in committed if r["method"] in ("paillier", "paillier-3072", "ckks")]
    assert len(he_rows) == 15
    for r in he_rows:
        limit = full.runtime_he_batches.get(r["method"].split("-")[0])
        rows, epochs, batches = he_measurement(r["n"], r["epochs"], full.runtime_batch_size, limit)
        assert batches == r["measured_batches"], r
        assert ((rows, epochs) != (r["n"], r["epochs"])) == r["extrapolated"], r
    assert he_measurement(10000, 5, 3200, None) == (10000, 5, 15)
    assert he_measurement(10000, 5, 3200, 14) == (10000, 4, 12)     # whole epochs
    assert he_measurement(50000, 1, 3200, 14) == (44800, 1, 14)     # a prefix of one epoch
    assert he_measurement(10000, 2, 3200, 14) == (10000, 2, 6)      # within the limit: in full


def test_he_runtime_cell_over_its_batches_is_extrapolated_and_labelled():
    from vflsec.bench.experiments.glm.runtime import _runtime_cell

    rng = np.random.default_rng(0)
    parts = [rng.random((120, 3)) / 3, rng.random((120, 2)) / 2]
    y = rng.integers(0, 2, 120)
    cell = _runtime_cell("paillier", parts, y, 120, 1, 40, 1, cache={}, key_bits=2048, label="p")
    assert cell["method"] == "p" and cell["key_bits"] == 2048
    assert cell["extrapolated"] is True and cell["measured_batches"] == 1 and cell["measured_rows"] == 40
    assert cell["seconds"] == pytest.approx(3 * cell["measured_seconds"])
    full = _runtime_cell("paillier", parts, y, 120, 1, 40, 3, cache={}, key_bits=2048)
    assert full["extrapolated"] is False and full["measured_batches"] == 3


def test_interrupted_run_writes_the_finished_cells_marked_partial(tmp_path, monkeypatch, capsys):
    finished = accuracy.run_accuracy(replace(TINY, epsilons=(1.0,), figure2=False))

    def interrupted(config, *, data_dir=None, state=None, log=print):
        state["accuracy"] = finished  # some cells done, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(accuracy, "run_accuracy", interrupted)
    with pytest.raises(SystemExit) as exc:
        runner.run(EXPERIMENT, {"quick": True, "out": tmp_path})
    assert exc.value.code == 130
    assert "vflsec bench glm: interrupted" in capsys.readouterr().err
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["partial"] is True and len(saved["accuracy"]["rows"]) == len(finished["rows"])
    assert saved["benchmark"] == "glm" and saved["seed"] == 0 and saved["runtime"] == []
    assert "Partial run" in (tmp_path / "report.md").read_text()


def test_he_rows_use_a_batch_larger_than_every_passive_block(monkeypatch):
    # HE-VFL refuses b <= d_P (the passive party's gradient would reveal the
    # residuals): its reference rows move to the best-scoring admissible
    # configuration instead of failing the run. Breast's passive block has more
    # than 4 columns; CV is made to prefer b = 4, then b = 64, then 3200 (455 rows).
    def scores(prep, grid, folds):
        return np.array([{4: 0.9, 64: 0.8}.get(h.batch_size, 0.7) for h in grid])

    monkeypatch.setattr(accuracy, "cv_plain_accuracy", scores)
    config = replace(TINY, grid_batch_sizes=(3200,), plain_extra_batch_sizes=(4, 64), grid_epochs=(1,),
                     grid_k=(1.0,), figure2=False, epsilons=(1.0,))
    rows = accuracy.run_accuracy(config)["rows"]
    plain = [r for r in rows if r["method"] == "plain" and r["family"] == "reference"]
    taylor = [r for r in rows if r["method"] == "taylor"]
    assert [r["config"]["batch_size"] for r in plain] == [4]
    assert taylor and all(r["config"]["batch_size"] == 64 for r in taylor)


def test_a_users_table_is_a_dataset_name_and_its_mistakes_are_one_line(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from sklearn.datasets import load_breast_cancer

    frame = load_breast_cancer(as_frame=True).frame
    frame["grade"] = np.where(frame["mean radius"] > 14, "high", "low")
    path = tmp_path / "mine.csv"
    frame.to_csv(path, index=False)
    grid = replace(TINY, datasets=(f"csv:{path}#label=target",))
    EXPERIMENT.check(grid, {})  # accepted: a table name loads
    rows = accuracy.run_accuracy(replace(grid, spectrum_epsilons=(), figure2=False), log=lambda _: None)["rows"]
    ref = {r["method"]: r["accuracy"] for r in rows if r["family"] == "reference"}
    assert ref["plain"] > ref["majority"] + 0.2
    for name, needle in ((f"csv:{tmp_path / 'none.csv'}", "no such file"),
                         (f"csv:{path}#label=nosuch", "no label column 'nosuch'"), ("nosuch", "unknown dataset")):
        with pytest.raises(BenchConfigError, match=needle):
            EXPERIMENT.check(replace(TINY, datasets=(name,)), {})
    assert pd is not None


def test_rare_labels_carry_pr_auc_beside_roc_auc_and_the_report_shows_it():
    """Positives under 20%: every AUC row also carries average precision (its random-ranking reference is
    the positive rate, the majority row's value); a balanced label carries none."""
    from sklearn.metrics import average_precision_score

    from vflsec.bench.experiments.glm.fits import pr_auc
    from vflsec.bench.experiments.glm.report import _auc_table
    from vflsec.bench.experiments.glm.summary import summarize

    rng = np.random.default_rng(0)
    y = np.where(rng.random(2000) < 0.06, 1.0, -1.0)
    scores = y + rng.normal(0.0, 2.0, y.size)
    assert pr_auc(scores, y) == pytest.approx(average_precision_score(y > 0, scores))
    assert pr_auc(scores, np.where(rng.random(2000) < 0.4, 1.0, -1.0)) is None
    rows = [{"dataset": "rare", "family": "reference", "method": m, "calibration": None, "epsilon": None,
             "accuracy": 0.94, "auc": a, "pr_auc": p} for m, a, p in (("majority", 0.5, 0.06), ("plain", 0.8, 0.3))]
    rows.append({"dataset": "rare", "family": "headline", "method": "hdp", "calibration": "analytic", "epsilon": 1.0,
                 "accuracy": 0.94, "auc": 0.7, "pr_auc": 0.2})
    table = _auc_table(summarize(rows)["rare"], [1.0])
    assert "PR-AUC" in table and "majority 0.500 (PR-AUC 0.060)" in table and "0.200" in table
    balanced = [dict(r, pr_auc=None) for r in rows]
    assert "PR-AUC" not in _auc_table(summarize(balanced)["rare"], [1.0])
