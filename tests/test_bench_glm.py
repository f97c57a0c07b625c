"""``vflsec bench glm`` on built-in data: the experiment description, the
headline selection rule, the references on every table, reproducibility and
strict JSON. (HE protocols are covered by test_glm_he.py; their cells here
are exercised through the budget logic only.)"""
import json
from dataclasses import replace

import numpy as np
import pytest

from vflsec.bench import glm
from vflsec.bench.glm.accuracy import REFERENCE_METHODS, search_epsilon, select_headline
from vflsec.bench.glm.experiment import PAPER_GRID, WIDE_GRID, GLMBenchConfig, cell_seed

TINY = GLMBenchConfig.quick_run(split_seeds=1, noise_draws=1, epsilons=(0.1, 1.0, 10.0), he_methods=(),
                                runtime_sizes=(400,), runtime_epochs=(1, 2), runtime_epochs_n=400,
                                runtime_batch_size=100, runtime_he_budget=1.0)


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
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("glm")
    result = glm.run_accuracy(TINY)
    return result, out


def test_every_reference_and_family_is_present(tiny_run):
    result, _ = tiny_run
    rows = result["rows"]
    methods = {r["method"] for r in rows if r["family"] == "reference"}
    assert set(REFERENCE_METHODS) - {"paillier", "ckks"} <= methods
    assert any("majority" in m for m in methods) and any("centralized" in m for m in methods)
    assert any("single_party" in m for m in methods)
    families = {r["family"] for r in rows}
    assert families == {"reference", "headline", "tuned_paper_grid", "tuned_wide_grid", "private_selection",
                        "figure2"}
    # The headline was selected on other data (the built-in synthetic set in a one-dataset run).
    assert result["headline"]["breast"]["selected_on"] == ["synthetic"]
    # Classic calibration only where it is an (epsilon, delta) guarantee.
    classic = [r for r in rows if r["calibration"] == "classic"]
    assert classic and all(r["epsilon"] < 1 and r["valid_dp"] for r in classic)
    tuned = [r for r in rows if r["family"].startswith("tuned")]
    assert all(r["search_epsilon"] > r["epsilon"] for r in tuned)
    assert all(r["noise"] == "seeded (experiment setting)" for r in rows if r["method"] == "hdp")


def test_plain_vfl_learns_like_centralized_and_dp_shows_a_tradeoff(tiny_run):
    rows = tiny_run[0]["rows"]
    ref = {r["method"]: r["accuracy"] for r in rows if r["family"] == "reference"}
    assert ref["plain"] >= ref["majority"] + 0.2
    assert ref["plain"] >= ref["centralized_sklearn"] - 0.03
    hdp = [r["accuracy"] for r in rows if r["family"] == "headline" and r["calibration"] == "analytic"]
    # On Breast the active party's features carry most of the signal, so HDP-VFL degrades towards
    # the active party alone rather than to chance; the cost of DP shows against plain VFL.
    assert np.mean(hdp) < ref["plain"] and min(hdp) > ref["majority"]


def test_same_seed_reproduces_and_os_entropy_does_not():
    config = replace(TINY, epsilons=(1.0,), figure2=False)
    a = [r["accuracy"] for r in glm.run_accuracy(config)["rows"]]
    b = [r["accuracy"] for r in glm.run_accuracy(config)["rows"]]
    assert a == b
    fresh = replace(config, seed=None)
    c = glm.run_accuracy(fresh)["rows"]
    assert all(r["noise"] == "OS-entropy CSPRNG" for r in c if r["method"] == "hdp")


def test_report_plots_and_strict_json(tiny_run, tmp_path):
    result, _ = tiny_run
    rt = glm.run_runtime(sizes=[400], epoch_counts=[1, 2], epochs_n=400, features=[5, 7],
                         methods=["plain", "hdp"], batch_size=100, he_budget=1.0)
    full = {"machine": {"cpu": "x", "logical_cores": 2, "load_average_start": (0.1, 0.1, 0.1),
                        "load_average_end": (0.2, 0.1, 0.1)},
            "config": dict(TINY.as_dict(), runtime_epochs_n=400), "accuracy": result, "runtime": rt,
            "seconds": 1.0}
    glm.render(full, tmp_path)
    report = (tmp_path / "report.md").read_text()
    for needle in ("## breast", "majority", "single_party", "centralized_sklearn", "ε excludes hyperparameter search",
                   "Figure 2", "## The paper's claims", "## Conclusion", "not covered by ε"):
        assert needle in report, needle
    text = (tmp_path / "results.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    for png in ("accuracy_vs_epsilon.png", "figure2.png", "runtime.png", "tradeoff.png"):
        assert (tmp_path / png).stat().st_size > 5000
    assert "![DP vs HE trade-off](tradeoff.png)" in report


def test_he_accuracy_cell_over_budget_is_skipped_and_listed():
    config = replace(TINY, epsilons=(1.0,), he_methods=("ckks",), he_accuracy_budget=1e-3, figure2=False)
    rows = glm.run_accuracy(config)["rows"]
    skipped = [r for r in rows if r.get("skipped")]
    assert [r["method"] for r in skipped] == ["ckks"] and skipped[0]["accuracy"] is None
    from vflsec.bench.glm.report import render_report

    report = render_report({"machine": {}, "config": config.as_dict(), "accuracy": {"rows": rows}, "runtime": []})
    assert "not run (estimated" in report


def test_cli_errors_are_one_line_with_exit_code_2(capsys):
    from vflsec.cli import main

    for argv, needle in ((["bench", "glm", "--datasets", "nosuch"], "unknown dataset"),
                         (["bench", "glm", "--split-seeds", "0"], "--split-seeds must be >= 1"),
                         (["bench", "glm", "--datasets", "credit", "--data-dir", "/nonexistent"], "--data-dir")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
    with pytest.raises(SystemExit) as exc:  # no prefix matching: --seed is not --seeds
        main(["bench", "glm", "--see", "1"])
    assert exc.value.code == 2


def test_he_runtime_cell_past_budget_is_extrapolated_and_labelled():
    from vflsec.bench.glm.runtime import _runtime_cell

    rng = np.random.default_rng(0)
    parts = [rng.random((120, 3)) / 3, rng.random((120, 2)) / 2]
    y = rng.integers(0, 2, 120)
    cell = _runtime_cell("paillier", parts, y, 120, 1, 40, 3, he_budget=1e-6, cache={}, key_bits=2048, label="p")
    assert cell["method"] == "p" and cell["key_bits"] == 2048
    assert cell["extrapolated"] is True and cell["measured_batches"] == 1
    assert cell["seconds"] == pytest.approx(3 * cell["measured_seconds"])


def test_interrupted_run_writes_the_finished_cells_marked_partial(tmp_path, monkeypatch):
    finished = glm.run_accuracy(replace(TINY, epsilons=(1.0,), figure2=False))

    def interrupted(config, *, data_dir=None, state=None, log=print):
        state["accuracy"] = finished  # some cells done, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(glm, "run_accuracy", interrupted)
    with pytest.raises(SystemExit) as exc:
        glm.run(quick=True, out=tmp_path)
    assert exc.value.code == 130
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["partial"] is True and len(saved["accuracy"]["rows"]) == len(finished["rows"])
    assert "Partial run" in (tmp_path / "report.md").read_text()


def test_he_rows_use_a_batch_larger_than_every_passive_block(monkeypatch):
    # HE-VFL refuses b <= d_P (the passive party's gradient would reveal the
    # residuals): its reference rows move to the best-scoring admissible
    # configuration instead of failing the run. Breast's passive block has more
    # than 4 columns; CV is made to prefer b = 4, then b = 64, then 3200 (455 rows).
    from vflsec.bench.glm import accuracy

    def scores(prep, grid, folds):
        return np.array([{4: 0.9, 64: 0.8}.get(h.batch_size, 0.7) for h in grid])

    monkeypatch.setattr(accuracy, "cv_plain_accuracy", scores)
    config = replace(TINY, grid_batch_sizes=(3200,), plain_extra_batch_sizes=(4, 64), grid_epochs=(1,),
                     grid_k=(1.0,), figure2=False, epsilons=(1.0,))
    rows = glm.run_accuracy(config)["rows"]
    plain = [r for r in rows if r["method"] == "plain" and r["family"] == "reference"]
    taylor = [r for r in rows if r["method"] == "taylor"]
    assert [r["config"]["batch_size"] for r in plain] == [4]
    assert taylor and all(r["config"]["batch_size"] == 64 for r in taylor)
