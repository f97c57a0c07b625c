"""``vflsec bench splitnn`` through the one runner: its sections run end to end on the
built-in fallback data, a tiny real run writes the envelope, every section's rows and
the papers' claims judged; an interrupted run keeps its finished rows; flags that set
grid keys are validated like the file."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("matplotlib")
torch.set_num_threads(1)

from vflsec.bench.experiments.splitnn import cells  # noqa: E402
from vflsec.bench.experiments.splitnn.baseline import IMPLS  # noqa: E402
from vflsec.bench.experiments.splitnn.data import load_adult_split, load_mnist_split  # noqa: E402
from vflsec.bench.experiments.splitnn.grid import load_grid  # noqa: E402
from vflsec.bench.experiments.splitnn.papers import TIMING_STEPS  # noqa: E402
from vflsec.bench.experiments.splitnn.plots import plot_table2, plot_table3, table2_summary  # noqa: E402
from vflsec.bench.experiments.splitnn.report import render, report_markdown  # noqa: E402
from vflsec.bench.experiments.splitnn.rescale import CELLS  # noqa: E402
from vflsec.bench.experiments.splitnn.verdicts import dp_vfl_verdicts, table2_verdicts  # noqa: E402
from vflsec.cli import main  # noqa: E402

MACHINE = {"cpu": "x", "logical_cores": 2}
RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def _settings(data_dir=None, **changes):
    """The [quick] grid's settings as the cells read them (the run's inputs beside them)."""
    cfg = dict(load_grid(True).run_settings(), device="cpu", quick=True,
               data_dir=None if data_dir is None else str(data_dir), sources={})
    cfg.update(changes)
    return cfg


@pytest.fixture
def empty(tmp_path):
    folder = tmp_path / "no-data"
    folder.mkdir()
    return folder


def test_table2_table3_report_and_plots(tmp_path, empty):
    adult = load_adult_split(empty, max_train=200, max_test=100)
    digits = load_mnist_split(empty, max_train=160, max_test=80)
    assert adult.name == "synthetic" and digits.name == "digits"
    assert digits.train_parts[0].shape == (160, 32)  # 8 x 4 left halves
    cfg = _settings(epochs=1, batch_size=40, timing_batch_size=40, timing_epochs=1, timing_rounds=1)
    acc = cells.run_table2({"adult": adult, "mnist": digits}, cfg)
    found = {(r["dataset"], r["defense"], r["variant"]) for r in acc}
    assert ("digits", "vfl_afe", "full") in found and ("synthetic", "centralized", None) in found
    assert len(acc) == 14 and all(0.0 <= r["value"] <= 1.0 for r in acc)  # 6 cells x 2 datasets + 2 majority rates
    assert all(r["section"] == "table2" for r in acc)
    majority = {r["dataset"]: r["value"] for r in acc if r["defense"] == "majority"}
    assert set(majority) == {"synthetic", "digits"} and 0.5 <= majority["synthetic"] < 1.0
    dp = [r for r in acc if r["defense"] == "vfl_afe"]
    assert all(r["delta"] == 0.01 and r["epsilon_composed"] >= r["epsilon_per_release_accountant"] for r in dp)
    timing = cells.run_table3(digits, cfg)
    assert {(r["step"], r["impl"]) for r in timing} == {(s, i) for s in TIMING_STEPS for i in IMPLS}
    assert all(r["kernel_seconds_per_step"] > 0 for r in timing if r["step"] != "base")
    result = {"machine": MACHINE, "config": cfg, "accuracy": acc, "timing": timing}
    report = report_markdown(result)
    assert "## Table 2" in report and "## Table 3" in report and "kernel speed-up" in report
    # the fallback datasets are not the paper's: its claims are printed, not measured
    assert "Claims of `papers/vfl_afe.toml`" in report and "**not measured**" in report
    assert "## Conclusion" in report
    assert plot_table2(table2_summary(acc), tmp_path / "t2.png", cfg["seeds"])
    plot_table3(timing, tmp_path / "t3.png", cfg["timing_rounds"] * cfg["timing_epochs"])
    assert (tmp_path / "t2.png").stat().st_size > 1000 and (tmp_path / "t3.png").stat().st_size > 1000
    json.dumps(result, default=lambda o: o.item() if isinstance(o, np.generic) else str(o))


def test_kernel_timing_rows():
    cfg = _settings(timing_batch_size=32)
    rows = cells.run_kernel_timing(cfg, dim=8, n_clusters=3)
    assert {(r["step"], r["impl"]) for r in rows} == {(s, i) for s in ("noise", "rescale", "adjust") for i in IMPLS}
    assert all(r["seconds_per_call"] > 0 for r in rows)
    report = report_markdown({"machine": MACHINE, "config": cfg, "accuracy": [], "timing": [],
                              "timing_isolated": rows})
    assert "fuzzy c-means" in report


@pytest.mark.slow  # DP-SGD's calibration and accounting: 15 to 60 s on 2 shared cores
def test_dp_vfl_and_fedpass_sections_tag_rows_and_render(tmp_path, empty):
    """The DP-VFL and FedPass sections put their rows in "accuracy" with their
    section name, the report has their tables, and Table 2 ignores them. DP-VFL
    runs once per clip entry: the default clip (fixed) has a guarantee, the
    paper's percentile none, and the report says which clip each row used."""
    cfg = _settings(empty)
    assert cfg["dp_vfl"]["clips"] == (1.0,)  # the default: C = 1, fixed before the run
    # two epsilons: the plot leaves out curves of one point
    cfg["dp_vfl"] = dict(cfg["dp_vfl"], datasets=("energy",), epsilons=(1.0, 2.0), clips=(1.0, "p80"), epochs=1,
                         max_rows=200)
    cfg["fedpass"] = dict(cfg["fedpass"], epochs=1, max_rows=200)
    rows = cells.section_dp_vfl({}, cfg)
    assert cells.section_fedpass({}, cfg, rows) is rows  # appended to the run's rows as they finish
    # Files absent: the built-in fallbacks run, under their own names.
    assert {r["dataset"] for r in rows if r["section"] == "dp_vfl"} == {"diabetes"}
    assert {r["dataset"] for r in rows if r["section"] == "fedpass"} == {"breast"}
    dp = [r for r in rows if r["defense"] == "dp_sgd"]
    assert [(r["epsilon"], r["variant"]) for r in dp] == [(1.0, "clip=1"), (1.0, "clip=p80"), (2.0, "clip=1"),
                                                          (2.0, "clip=p80")]
    assert all(r["metric"] == "mse" for r in dp)
    # C fixed before the run: a guarantee within the target. The paper's percentile clip reads the data it
    # protects: no guarantee, labelled as such in the report.
    assert all(0 < r["epsilon_composed"] <= r["epsilon"] for r in dp if r["variant"] == "clip=1")
    assert all(r["epsilon_composed"] is None for r in dp if r["variant"] == "clip=p80")
    assert any(r["defense"] == "centralized" for r in rows)
    assert {r["defense"] for r in rows if r["section"] == "fedpass"} == {"none", "fedpass"}
    result = {"machine": MACHINE, "config": cfg, "accuracy": rows, "timing": []}
    written = render(result, tmp_path / "out")
    assert written == ["report.md", "dp_vfl.png"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## DP-VFL" in report and "## FedPass" in report and "## Table 2" not in report
    assert "| clip=p80 | 1 | no guarantee |" in report and "Claims of `papers/dp_vfl.toml`" in report
    assert "| clip=1 | 1 | 0.99" in report or "| clip=1 | 1 | 1 " in report
    assert ("Clip thresholds (each DP-SGD cell once per clip): C = 1, fixed before the run, not read from the data; "
            "the 80th percentile of the per-sample gradient norms over the first 50 steps (clip=p80)") in report
    # the Conclusion, per clip
    assert "DP-VFL on diabetes with the clip fixed before the run (clip=1): at epsilon = 1" in report
    assert "DP-VFL on diabetes with the paper's percentile clip (clip=p80, read from the gradients: no guarantee)" \
        in report
    assert "FedPass on breast" in report
    assert (tmp_path / "out" / "dp_vfl.png").stat().st_size > 1000
    assert not (tmp_path / "out" / "table2_accuracy.png").exists()


def test_rescale_section_rows_report_and_plot(tmp_path, empty):
    """The rescale section trains every (variant, rescale_shrink) cell, records
    the rule's factor per epoch for the +R cells, and renders on its own."""
    digits = load_mnist_split(empty, max_train=160, max_test=80)
    cfg = _settings(epochs=2, batch_size=40)
    rows = cells.SECTIONS["rescale"]({"mnist": digits}, cfg)
    assert len(rows) == len(CELLS) and all(r["section"] == "rescale" for r in rows)
    for r in rows:
        assert 0.0 <= r["value"] <= 1.0 and len(r["train_accuracy_by_epoch"]) == 2
        assert len(r["factor_by_epoch"]) == (2 if r["variant"] != "vanilla" else 0)
        if not r["rescale_shrink"]:
            assert min(r["factor_by_epoch"]) >= 1.0
        # The estimate mu + 3 sigma against the largest distance: positive, and
        # (tests/splitnn/test_defenses.py checks the overshoot case) finite.
        assert all(0.0 < v < float("inf") for v in r["estimate_over_max_by_epoch"])
    result = {"machine": MACHINE, "config": cfg, "accuracy": rows, "timing": []}
    render(result, tmp_path / "out")
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## +R measured" in report and "R, no shrink" in report and "## Table 2" not in report
    assert (tmp_path / "out" / "rescale.png").stat().st_size > 1000


@pytest.mark.slow  # two full tiny runs, or a subprocess interrupted mid-run: seconds
def test_noise_seed_fixes_the_dp_noise_and_is_labelled(empty):
    """noise_seed (--seed): the VFL-AFE (Table 2) and DP-SGD (dp_vfl) noise comes
    from seeded generators, so two runs give the same numbers; the report says so.
    Without it the noise is OS entropy (the default, unchanged)."""
    adult = load_adult_split(empty, max_train=120, max_test=60)
    cfg = _settings(empty, epochs=1, batch_size=40, noise_seed=0)
    cfg["dp_vfl"] = dict(cfg["dp_vfl"], datasets=("energy",), owners=(3,), epsilons=(1.0,), epochs=1, max_rows=200,
                         batch_size=40)

    def dp_values(c):
        table2 = [r["value"] for r in cells.run_table2({"adult": adult}, c) if r["defense"] == "vfl_afe"]
        dp_vfl = [r["value"] for r in cells.section_dp_vfl({}, c) if r["defense"] == "dp_sgd"]
        return table2, dp_vfl

    first, second = dp_values(cfg), dp_values(cfg)
    assert first[0] and first[1] and first == second
    report = report_markdown({"machine": MACHINE, "config": cfg, "accuracy": [], "timing": []})
    assert "DP noise: seeded generator (seed 0; experiment setting, not for deployment)" in report
    unseeded = report_markdown({"machine": MACHINE, "config": {**cfg, "noise_seed": None}, "accuracy": [],
                                "timing": []})
    assert "DP noise: OS-entropy CSPRNG" in unseeded


# The shipped [quick] grid shrunk to seconds on the fallback data; every section but rescale.
TINY = """
[quick]
sections = ["table2", "table3", "dp_vfl", "fedpass"]
epochs = 1
batch_size = 40
seeds = 1
adult_max_train = 200
adult_max_test = 100
mnist_max_train = 160
mnist_max_test = 80
timing_rows = 80
timing_batch_size = 40
timing_epochs = 1
timing_rounds = 1

[quick.afe]
t = 10.0
calibration = "analytic"
kl_weight = 0.01
contrastive_weight = 0.1

[quick.tabular]
epsilon = 5.0
confidence_threshold = 0.8
lr = 1e-3

[quick.image]
epsilon = 20.0
confidence_threshold = 0.5
lr = 1e-3

[quick.dp_vfl]
datasets = ["energy"]
owners = [3]
epsilons = [1.0, 2.0]
clips = [1.0]
epochs = 1
batch_size = 40
lr = 0.05
max_rows = 200

[quick.fedpass]
settings = [[100.0, 5.0]]
epochs = 1
max_rows = 200

[quick.rescale]
seeds = 1
"""


@pytest.mark.slow
def test_a_tiny_run_writes_the_envelope_every_section_and_rerenders_unchanged(tmp_path, empty):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "out"
    assert main(["bench", "splitnn", "--quick", "--config", str(config), "--data-dir", str(empty), "--device", "cpu",
                 "--seed", "3", "--out", str(out)]) == 0
    data = json.loads((out / "results.json").read_text())
    # the runner's envelope; --seed is the grid's noise_seed
    assert data["benchmark"] == "splitnn" and data["seed"] == 3 and data["config"]["noise_seed"] == 3
    assert data["quick"] is True and "partial" not in data and set(data["load"]) == {"start", "end"}
    assert {"vflsec", "torch", "numpy", "dp-accounting"} <= set(data["versions"])
    # the run's inputs that are not grid keys, recorded beside the grid
    cfg = data["config"]
    assert cfg["device"] == "cpu" and cfg["quick"] is True and cfg["data_dir"] == str(empty)
    assert set(cfg["sources"]) == {"synthetic", "digits"} and cfg["sections"] == ["table2", "table3", "dp_vfl",
                                                                                  "fedpass"]
    assert data["noise_release"] == "lattice" and data["dp_layer"] == 1
    assert {r["section"] for r in data["accuracy"]} == {"table2", "dp_vfl", "fedpass"}
    assert len(data["timing"]) == len(TIMING_STEPS) * len(IMPLS) and len(data["timing_isolated"]) == 6
    report = (out / "report.md").read_text()
    assert "Machine load (Table 3's timings slow down under it): load average (1/5/15 min) " in report
    for heading in ("## Table 2", "## Table 3", "## DP-VFL", "## FedPass", "## Conclusion"):
        assert heading in report, heading
    for png in ("table2_accuracy.png", "table3_timing.png", "dp_vfl.png"):
        assert (out / png).stat().st_size > 1000, png
    # --rerender: nothing measured, the same report from the same results
    before = (out / "results.json").read_bytes()
    (out / "report.md").unlink()
    assert main(["bench", "splitnn", "--rerender", str(out)]) == 0
    assert (out / "report.md").read_text() == report and (out / "results.json").read_bytes() == before


def test_an_interrupted_run_writes_the_finished_rows_marked_partial(tmp_path, empty, monkeypatch, capsys):
    """Ctrl-C during Table 3: the runner writes the Table 2 rows that finished, marked
    partial, renders them and exits 130."""
    config = tmp_path / "tiny.toml"
    config.write_text(TINY.replace("mnist_max_train = 160", "mnist_max_train = 40"))

    def interrupted(data, cfg):
        raise KeyboardInterrupt

    monkeypatch.setattr(cells, "run_table3", interrupted)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        main(["bench", "splitnn", "--quick", "--config", str(config), "--sections", "table2,table3", "--data-dir",
              str(empty), "--device", "cpu", "--out", str(out)])
    assert info.value.code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("vflsec bench splitnn: interrupted")
    saved = json.loads((out / "results.json").read_text())
    assert saved["partial"] is True and saved["config"]["sections"] == ["table2", "table3"]
    assert len(saved["accuracy"]) == 14 and saved["timing"] == []  # every Table 2 row, no Table 3
    assert "Partial run" in (out / "report.md").read_text()


def test_seeds_sets_table2_and_rescale_and_flags_are_validated_like_the_file(tmp_path, capsys):
    grid = load_grid(False, seeds=3)
    assert grid.seeds == 3 and grid.rescale.seeds == 3
    assert load_grid(False).rescale.seeds == 2 and load_grid(False).noise_seed is None
    assert "rescale" not in load_grid(False).sections  # measured on request only
    for argv, needle in ((["--sections", "table2,nosuch"], "sections[1]: expected one of 'table2'"),
                         (["--seed", "-1"], "noise_seed: expected an integer >= 0, got -1"),
                         (["--seeds", "0"], "seeds: expected an integer >= 1, got 0"),
                         (["--device", "nosuchdevice"], "--device: invalid device 'nosuchdevice'")):
        with pytest.raises(SystemExit) as info:
            main(["bench", "splitnn", "--quick", "--out", str(tmp_path / "out"), *argv])
        err = capsys.readouterr().err.strip()
        assert info.value.code == 2 and err.count("\n") == 0, err
        assert err.startswith("vflsec bench splitnn: error: ") and needle in err, err
    assert not (tmp_path / "out").exists()  # refused before any work


def test_the_papers_claims_are_judged_on_the_committed_run():
    """papers/vfl_afe.toml and papers/dp_vfl.toml judged on results/splitnn/: the
    measured quantities come from the rows, the thresholds from the TOML."""
    result = json.loads((RESULTS / "splitnn" / "results.json").read_text())
    verdicts = {v.claim.id: v for v in table2_verdicts(result)}
    # Adult: vanilla 77.24, +R 76.15, +D 78.27, full 76.00; majority class 76.38 (%)
    assert verdicts["rescale_gains_adult"].measured == pytest.approx(76.15 - 77.24, abs=0.01)
    assert verdicts["rescale_gains_adult"].holds is False and verdicts["adjust_gains_adult"].holds is True
    assert verdicts["learns_adult"].measured == pytest.approx(76.00 - 76.38, abs=0.01)
    assert verdicts["learns_adult"].claim.threshold == 0.5 and verdicts["learns_adult"].holds is False
    assert verdicts["learns_mnist"].holds is True
    (dp,) = dp_vfl_verdicts(result)
    assert dp.claim.quantity == "dp_vfl.adult.cost_drop" and abs(dp.measured) < 0.5 and dp.holds is False
    # a run without the paper's datasets measures none of them
    assert all(v.holds is None for v in table2_verdicts({"accuracy": []}) + dp_vfl_verdicts({"accuracy": []}))
