"""Outputs of every benchmark report (issue 17; ``bench he`` has its own tests):
strict JSON through one writer, figures saved with a tight bounding box, no
panel with fewer than 2 points, n in every legend entry of a measured series,
distinguishable reference lines, bytes plotted where a report has bytes, and a
Conclusion whose numbers come from the results it is given."""
from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

import vflsec.bench.common as bench_common  # noqa: E402
from vflsec.bench.common import write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
BENCH = Path(bench_common.__file__).resolve().parent

# Legend entries that are definitions or published numbers, not measured series (no n to give).
DEFINITIONS = ("1 (no rescaling)", "auxiliary-mean guess", "2-3x (HDP-VFL's claim)", "paper (its Table 2)",
               "1x: the same time")


# -- one writer for JSON, one for figures -------------------------------------------------------------------------
def _bench_modules():
    return list(BENCH.rglob("*.py"))


def test_every_benchmark_writes_json_and_figures_through_the_shared_writers():
    offenders = []
    for path in _bench_modules():
        if path.name == "common.py":
            continue
        text = path.read_text()
        # json.dumps inside a generated subprocess script (kernels' memory probe) prints, it writes no file
        if re.search(r"\bjson\.dump\(", text) or ".savefig(" in text:
            offenders.append(str(path.relative_to(BENCH)))
    assert offenders == [], "use bench.common.write_json / save_figure"


def test_write_json_is_strict(tmp_path):
    payload = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": np.float64("nan"), "d": np.arange(3),
               "e": {"f": np.float32(2.5), "g": (np.inf, np.int64(4))}}
    write_json(tmp_path / "r.json", payload)
    text = (tmp_path / "r.json").read_text()
    loaded = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict constant {c}"))
    assert loaded == {"a": None, "b": [None, None, 1.5], "c": None, "d": [0, 1, 2],
                      "e": {"f": 2.5, "g": [None, 4]}}


@pytest.mark.parametrize("name", ["glm/results.json", "splitnn/results.json", "splitnn_rescale/results.json",
                                  "privacy/results.json", "network/results.json", "kernels/kernels.json",
                                  "he/results.json"])
def test_committed_results_are_strict_json(name):
    json.loads((RESULTS / name).read_text(), parse_constant=lambda c: pytest.fail(f"{name}: constant {c}"))


# -- figure checks ------------------------------------------------------------------------------------------------
@pytest.fixture
def saved(monkeypatch):
    """Every figure saved while the test runs: (figure, path, savefig keyword arguments)."""
    figures = []
    original = Figure.savefig

    def spy(self, fname, *args, **kwargs):
        figures.append((self, Path(fname), kwargs))
        return original(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    return figures


def _points(ax) -> int:
    """Data points drawn in ``ax`` (reference lines and bands excluded)."""
    from matplotlib.collections import PathCollection

    n = sum(len(line.get_xdata()) for line in ax.lines if line.get_transform() is ax.transData)
    n += sum(1 for p in ax.patches if p.get_data_transform() is ax.transData)
    n += sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
    n += sum(im.get_array().size for im in ax.images)
    return n


def _check_figure(fig, path, kwargs):
    assert kwargs.get("bbox_inches") == "tight", f"{path.name}: labels may be cut"
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    assert panels, path.name
    for ax in panels:
        assert _points(ax) >= 2, f"{path.name}: panel {ax.get_title()!r} has {_points(ax)} point(s)"
        legend = ax.get_legend()
        labels = [t.get_text() for t in legend.get_texts()] if legend is not None else []
        if legend is not None and "n=" in legend.get_title().get_text():
            labels = []  # the legend's title gives n for every entry
        for label in labels:
            assert "n=" in label or label.startswith(DEFINITIONS), f"{path.name}: legend entry {label!r} lacks n"
        refs = [line for line in ax.lines if line.get_transform() is not ax.transData]
        styles = [(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()) for line in refs]
        assert len(set(styles)) == len(styles), f"{path.name}: reference lines share a style {styles}"


def _check_all(saved, expected):
    names = sorted(p.name for _, p, _ in saved)
    assert names == sorted(expected)
    for fig, path, kwargs in saved:
        _check_figure(fig, path, kwargs)


# -- synthetic results per benchmark ------------------------------------------------------------------------------
def _glm_summary():
    rng = np.random.default_rng(0)
    acc = lambda m: list(m + 0.01 * rng.standard_normal(3))  # noqa: E731
    reference = {"majority": [0.63] * 3, "single_party": acc(0.9), "centralized_sklearn": acc(0.96),
                 "centralized_gd": acc(0.955), "plain": acc(0.95), "taylor": acc(0.95)}
    dp = {("headline", "analytic"): {e: acc(0.6 + 0.05 * i) for i, e in enumerate((0.1, 1.0, 10.0))},
          ("tuned_wide_grid", "analytic"): {1.0: acc(0.8), 10.0: acc(0.9)}}
    figure2 = {(e, k): {"hdp": acc(0.7), "plain": acc(0.9)} for e in (5, 10) for k in (0.1, 0.3)}
    return {"breast": {"reference": reference, "dp": dp, "search": {}, "figure2": figure2, "skipped": {},
                       "auc": {}}}


def _glm_runtime(sizes=(1000, 2000), epochs=(1, 2)):
    rows = []
    for i, method in enumerate(("plain", "hdp", "paillier")):
        for n in sizes:
            rows.append({"method": method, "n": n, "epochs": 1, "seconds": 0.1 * (i + 1) * n / 1000,
                         "bytes": 1e5 * (10 ** i) * n / 1000, "extrapolated": method == "paillier",
                         "measured_batches": 1})
        for e in epochs:
            if e != 1:
                rows.append({"method": method, "n": sizes[0], "epochs": e, "seconds": 0.1 * (i + 1) * e,
                             "bytes": 1e5 * (10 ** i) * e, "extrapolated": False, "measured_batches": 1})
    return rows


def test_glm_plots(saved, tmp_path):
    from vflsec.bench.experiments.glm.plots import plot_accuracy, plot_figure2, plot_runtime, plot_tradeoff

    summary = _glm_summary()
    plot_accuracy(summary, tmp_path / "accuracy_vs_epsilon.png")
    assert plot_figure2(summary, tmp_path / "figure2.png")
    assert plot_runtime(_glm_runtime(), 1000, tmp_path / "runtime.png")
    assert plot_tradeoff(summary, _glm_runtime(), 1000, tmp_path / "tradeoff.png")
    _check_all(saved, ["accuracy_vs_epsilon.png", "figure2.png", "runtime.png", "tradeoff.png"])
    runtime = next(fig for fig, p, _ in saved if p.name == "runtime.png")
    assert any("bytes" in ax.get_ylabel() for ax in runtime.axes)
    accuracy = next(fig for fig, p, _ in saved if p.name == "accuracy_vs_epsilon.png")
    assert len([line for line in accuracy.axes[0].lines if line.get_transform() is not accuracy.axes[0].transData]) == 6


def test_glm_runtime_plot_leaves_out_one_point_panels(saved, tmp_path):
    from vflsec.bench.experiments.glm.plots import plot_runtime
    from vflsec.bench.experiments.glm.summary import runtime_series

    one_size = _glm_runtime(sizes=(1000,), epochs=(1, 2, 3))
    assert set(runtime_series(one_size, 1000)) == {"epochs"}
    assert plot_runtime(one_size, 1000, tmp_path / "runtime.png")
    fig = saved[0][0]
    assert len(fig.axes) == 2  # one column (against epochs): time and bytes
    assert not plot_runtime(_glm_runtime(sizes=(1000,), epochs=(1,)), 1000, tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()
    _check_all(saved, ["runtime.png"])


def _splitnn_result(seeds=2, dp_epsilons=(1.0, 10.0, 100.0)):
    rows = []
    values = {"centralized": 0.86, "unprotected": 0.85, "vanilla": 0.77, "R": 0.75, "D": 0.78, "full": 0.75}
    for seed in range(seeds):
        for cell, value in values.items():
            defense = {"centralized": "centralized", "unprotected": "none"}.get(cell, "vfl_afe")
            dp = defense == "vfl_afe"
            rows.append({"section": "table2", "dataset": "adult", "defense": defense,
                         "variant": cell if dp else None, "parties": 2, "seed": seed, "metric": "test_accuracy",
                         "value": value, "epsilon": 5.0 if dp else None, "delta": 0.01 if dp else None,
                         "epsilon_composed": 45.0 if dp else None})
    rows.append({"section": "dp_vfl", "dataset": "adult", "defense": "centralized", "variant": None, "parties": 1,
                 "epsilon": None, "epsilon_composed": None, "metric": "accuracy", "value": 0.845})
    for m, ref in ((3, 0.83), (4, 0.84)):
        rows.append({"section": "dp_vfl", "dataset": "adult", "defense": "none", "variant": "vfl", "parties": m,
                     "epsilon": None, "epsilon_composed": None, "metric": "accuracy", "value": ref})
        for i, e in enumerate(dp_epsilons):
            rows.append({"section": "dp_vfl", "dataset": "adult", "defense": "dp_sgd", "variant": None,
                         "parties": m, "epsilon": e, "epsilon_composed": e, "metric": "accuracy",
                         "value": ref - 0.05 + 0.02 * i})
    rows.append({"section": "fedpass", "dataset": "adult", "defense": "none", "variant": None, "value": 0.83})
    for variant, value in (("N=2,sigma2=1", 0.78), ("N=100,sigma2=64", 0.84)):
        rows.append({"section": "fedpass", "dataset": "adult", "defense": "fedpass", "variant": variant,
                     "value": value})
    for seed in range(seeds):
        for variant, shrink, value in (("vanilla", True, 0.77), ("R", True, 0.75), ("R", False, 0.77),
                                       ("full", True, 0.76), ("full", False, 0.775)):
            label = variant if variant == "vanilla" or shrink else f"{variant}, no shrink"
            traced = variant != "vanilla"
            rows.append({"section": "rescale", "dataset": "adult", "defense": "vfl_afe", "variant": variant,
                         "rescale_shrink": shrink, "label": label, "seed": seed, "metric": "test_accuracy",
                         "value": value, "factor_by_epoch": [2.0, 1.0 if not shrink else 0.6] if traced else [],
                         "estimate_over_max_by_epoch": [1.5, 1.4] if traced else []})
    timing = []
    for impl, kernel in (("vflsec", 1.0), ("baseline", 4.0)):
        for step, seconds in (("base", 0.06), ("noise", 0.001), ("rescale", 0.004), ("adjust", 0.006)):
            timing.append({"dataset": "mnist", "step": step, "impl": impl, "seconds_per_step": seconds,
                           "kernel_seconds_per_step": None if step == "base" else kernel * 1e-3,
                           "defense_seconds_per_step": None, "batch_size": 256, "n_samples": 5000})
    isolated = [{"step": step, "impl": impl, "seconds_per_call": t, "batch_size": 256, "dim": 64}
                for step in ("noise", "rescale", "adjust") for impl, t in (("vflsec", 1e-4), ("baseline", 3e-4))]
    config = {"seeds": seeds, "timing_rounds": 3, "timing_epochs": 3}
    return {"accuracy": rows, "timing": timing, "timing_isolated": isolated, "config": config}


def test_splitnn_plots(saved, tmp_path):
    from vflsec.bench.experiments.splitnn.plots import plot_dp_vfl, plot_table2, plot_table3, table2_summary
    from vflsec.bench.experiments.splitnn.rescale import plot_rescale

    result = _splitnn_result()
    assert plot_table2(table2_summary(result["accuracy"]), tmp_path / "table2_accuracy.png", 2)
    plot_table3(result["timing"], tmp_path / "table3_timing.png", 9)
    assert plot_dp_vfl([r for r in result["accuracy"] if r["section"] == "dp_vfl"], tmp_path / "dp_vfl.png")
    plot_rescale(result, tmp_path / "rescale.png")
    _check_all(saved, ["table2_accuracy.png", "table3_timing.png", "dp_vfl.png", "rescale.png"])


def test_splitnn_dp_plot_leaves_out_a_single_epsilon(saved, tmp_path):
    from vflsec.bench.experiments.splitnn.plots import plot_dp_vfl

    rows = [r for r in _splitnn_result(dp_epsilons=(1.0,))["accuracy"] if r["section"] == "dp_vfl"]
    assert not plot_dp_vfl(rows, tmp_path / "dp_vfl.png")
    assert saved == []


def _privacy_rows():
    rows = []
    for defense, strengths in (("none", [None]), ("noise_embedding", [0.1, 1.0]), ("vfl_afe", [10.0, 1.0])):
        for i, strength in enumerate(strengths):
            for attack, metric, value in (("model_inversion_blackbox", "mse", 0.01 + 0.01 * i),
                                          ("model_inversion_whitebox", "mse", 0.02 + 0.01 * i),
                                          ("norm_scoring", "accuracy", 0.9 - 0.1 * i),
                                          ("model_completion", "accuracy", 0.8 - 0.1 * i)):
                rows.append({"dataset": "breast", "defense": defense, "strength": strength, "attack": attack,
                             "metric": metric, "value": value, "main_accuracy": 0.95 - 0.02 * i,
                             "epsilon_composed": None})
    # one point only on another dataset: no panel, no file
    rows.append({"dataset": "credit", "defense": "none", "strength": None, "attack": "norm_scoring",
                 "metric": "accuracy", "value": 0.7, "main_accuracy": 0.8, "epsilon_composed": None})
    for defense, strength, value in (("plain", None, 0.05), ("hdp", 1.0, 0.9), ("paillier", None, 1.0)):
        rows.append({"dataset": "breast", "defense": defense, "strength": strength, "attack": "equality_solving",
                     "metric": "normalized_mse", "value": value, "main_accuracy": 0.9, "epsilon_composed": None})
    return rows


def test_privacy_plots(saved, tmp_path):
    from vflsec.bench.experiments.privacy.report import plot_tradeoffs

    files = plot_tradeoffs(_privacy_rows(), tmp_path)
    assert files == ["tradeoff_breast.png", "equality_solving.png"]
    _check_all(saved, files)


def test_kernels_plot(saved, tmp_path):
    from vflsec.bench.experiments.kernels.report import plot_speedups

    summary = [{"kernel": "pairwise_distances", "case": "float32 n=m=4000 d=16 Y=X (a long case label)",
                "speedup_vs_each": {"scipy.cdist": 5.4, "torch.cdist": 2.2}},
               {"kernel": "fcm", "case": "n=100000", "speedup_vs_each": {"numpy": 0.8}}]
    plot_speedups(summary, tmp_path / "kernels.png", repeats=7)
    _check_all(saved, ["kernels.png"])
    legend = [t.get_text() for t in saved[0][0].axes[0].get_legend().get_texts()]
    assert "n=7" in legend[0]


def _network_payload():
    methods = []
    for i, method in enumerate(("plain", "hdp", "paillier")):
        methods.append({"method": method, "n_samples": 1000, "in_memory_train_s": 0.01 * 10 ** i,
                        "network_train_s": 0.15 * 10 ** i, "network_party_total_s": 3.0 + 0.15 * 10 ** i,
                        "network_psi_s": 1.5, "in_memory_payload_bytes": 3e5 * 10 ** i,
                        "network_training_payload_bytes": 3e5 * 10 ** i, "network_wire_bytes_sent": 1.2e6 * 10 ** i,
                        "max_abs_coef_diff": 0.0 if method != "paillier" else 1e-3})
    links = []
    for method, base in (("plain", 0.02), ("paillier", 20.0)):
        for link, bw, factor in (("loopback", None, 1.0), ("wan", 2e7, 3.0)):
            links.append({"method": method, "link": link, "bandwidth_bps": bw, "rtt_s": 0.03, "seconds": base * factor,
                          "predicted_seconds": base * factor, "bytes": 1e5 if method == "plain" else 2e6,
                          "rounds": 8, "compute_seconds": base, "prediction_error": 0.05,
                          "calibration_run": link == "loopback", "communication_share": 0.5,
                          "vs_plain": None})
    for r in links:
        r["vs_plain"] = r["seconds"] / next(p["seconds"] for p in links if p["method"] == "plain" and
                                            p["link"] == r["link"])
    psi = [{"n_ids": 1000, "shared": 500, "client_request_s": 0.1, "server_reply_s": 0.1, "client_intersect_s": 0.1,
            "total_s": 0.3, "request_bytes": 10, "setup_bytes": 10, "response_bytes": 10}]
    return {"methods": methods, "psi": psi, "links": links, "dataset": "synthetic", "quick": True, "machine": {},
            "links_profiles": [{"link": "loopback"}, {"link": "wan"}], "links_job": {}, "links_calibration": {},
            "links_model_answer": []}


def test_network_plots(saved, tmp_path):
    from vflsec.bench.experiments.network.links_report import plot_links
    from vflsec.bench.experiments.network.report import plot_loopback

    payload = _network_payload()
    plot_loopback(payload, tmp_path / "network.png")
    assert plot_links(payload, tmp_path / "links.png")
    _check_all(saved, ["network.png", "links.png"])
    for fig, _, _ in saved:  # both reports have bytes: both figures plot them
        assert any("bytes" in ax.get_ylabel() for ax in fig.axes)
    only_loopback = dict(payload, links=[r for r in payload["links"] if r["link"] == "loopback"])
    assert not plot_links(only_loopback, tmp_path / "none.png")


# -- conclusions --------------------------------------------------------------------------------------------------
def _conclusion_text(report: str) -> str:
    assert "## Conclusion" in report
    return report.split("## Conclusion", 1)[1]


def test_splitnn_conclusion_is_computed_from_the_results():
    from vflsec.bench.experiments.splitnn.conclusion import conclusion

    result = _splitnn_result()
    text = "\n".join(conclusion(result))
    assert "unprotected split learning reaches 85.0%" in text
    assert "At epsilon = 5 per release (45 composed over the run, delta = 0.01), VFL-AFE costs 10.0 points" in text
    assert "the noise alone (vanilla) costs 8.0 points, adding the rescale (+R) costs 2.0 more, adding the " \
           "gradient adjustment (+D) wins back 1.0" in text
    assert "fuzzy c-means 4x" in text and "the distance statistics 3x" in text
    assert "at epsilon = 1, DP-SGD costs 5.0 points of accuracy" in text
    assert "at epsilon = 100, DP-SGD costs 1.0 points of accuracy" in text
    assert "FedPass on adult: against 83.0% unprotected" in text and "costs 5.0 points" in text
    assert "R +2.0, full +1.5 points against the paper's rule" in text
    # other numbers in, other numbers out
    for r in result["accuracy"]:
        if r["section"] == "table2" and r["variant"] == "full":
            r["value"] = 0.80
    assert "VFL-AFE costs 5.0 points" in "\n".join(conclusion(result))


def test_splitnn_report_ends_with_its_conclusion():
    from vflsec.bench.experiments.splitnn.report import report_markdown

    result = _splitnn_result()
    result.update(machine={"cpu": "x", "logical_cores": 2}, config=dict(
        result["config"], device="cpu", quick=True, epochs=3, batch_size=128, lr=0.001, t=10.0, epsilon=5.0,
        calibration="classic", kl_weight=0.01, contrastive_weight=0.1, confidence_threshold=0.8, sources={},
        dp_vfl={"lr": 0.05, "batch_size": 100, "epochs": 2, "max_rows": 100},
        fedpass={"epochs": 2, "max_rows": 100}, rescale={"seeds": 2}))
    assert "VFL-AFE costs 10.0 points" in _conclusion_text(report_markdown(result))


def test_network_conclusion_is_computed_from_the_results():
    from vflsec.bench.experiments.network.report import report_markdown

    text = _conclusion_text(report_markdown(_network_payload()))
    assert "training takes 15x (plain), 15x (hdp), 15x (paillier) the in-memory time" in text
    assert "equal the in-memory run's for plain, hdp; differ from it for paillier by 0.001" in text
    assert "paillier costs 100x the training time and 100x the wire bytes of plain VFL" in text
    assert "Two-party PSI of 1,000 IDs per party takes 0.3 s" in text
    assert "Over emulated links: " in text


# -- committed results re-rendered ---------------------------------------------------------------------------------
@pytest.mark.parametrize("bench, folder, name", [
    ("splitnn", "splitnn", "results.json"), ("splitnn", "splitnn_rescale", "results.json"),
    ("network", "network", "results.json"), ("privacy", "privacy", "results.json"),
    ("kernels", "kernels", "kernels.json")])
def test_rerender_writes_report_and_plots_without_touching_the_results(tmp_path, saved, bench, folder, name):
    from vflsec.cli import main

    target = tmp_path / folder
    shutil.copytree(RESULTS / folder, target)
    before = (target / name).read_bytes()
    for png in target.glob("*.png"):
        png.unlink()
    assert main(["bench", bench, "--rerender", str(target)]) == 0
    assert (target / name).read_bytes() == before
    report = target / ("kernels.md" if bench == "kernels" else "report.md")
    assert "## Conclusion" in report.read_text()
    assert saved, "no figure written"
    for fig, path, kwargs in saved:
        _check_figure(fig, path, kwargs)
    linked = set(re.findall(r"\]\(([^)]+\.png)\)", report.read_text()))
    assert linked <= {p.name for p in target.glob("*.png")}


def test_cuda_kernels_report_has_a_conclusion(saved, tmp_path):
    from vflsec.bench.experiments.kernels.analysis import summarize
    from vflsec.bench.experiments.kernels.report import render_cuda

    rows = [{"kernel": "pairwise_distances", "case": "float32 n=4000", "method": m, "seconds": t}
            for m, t in (("vflsec cuda", 0.002), ("torch.cdist cuda", 0.005))]
    rows += [{"kernel": "fuzzy_cmeans", "case": "n=100000", "method": m, "seconds": t}
             for m, t in (("vflsec cuda", 0.02), ("torch cuda", 0.01))]
    result = {"machine": {"gpu": "test GPU"}, "results": rows, "summary": summarize(rows), "config": {"repeats": 5}}
    render_cuda(result, tmp_path)
    text = _conclusion_text((tmp_path / "kernels-cuda.md").read_text())
    assert "pairwise_distances: 2.5x as fast as the fastest alternative (torch.cdist cuda)" in text
    assert "fuzzy_cmeans: 0.5x" in text and "slower in 1 (n=100000)" in text
    _check_all(saved, ["kernels-cuda.png"])


def test_kernels_conclusion_names_the_fastest_alternative_as_accurate(tmp_path):
    from vflsec.bench.experiments.kernels.analysis import summarize
    from vflsec.bench.experiments.kernels.report import conclusion

    rows = [{"kernel": "pairwise_distances", "case": f"d={d}", "method": m, "seconds": t * d, "max_rel_error": e}
            for d in (16, 64)
            for m, t, e in (("vflsec cuda", 0.002, 2e-7), ("torch.cdist cuda", 0.001, 1e-2),
                            ("torch.cdist cuda (donot_use_mm)", 0.08, 1.3e-7))]
    text = conclusion(rows, summarize(rows))
    assert "in 2 of them torch.cdist cuda has a max relative error of 0.01 against vflsec's 2e-07" in text
    assert "vflsec is 40x as fast as the fastest alternative as accurate (torch.cdist cuda (donot_use_mm))" in text
    # An alternative as accurate as vflsec is the fastest: nothing to add.
    close = [dict(r, max_rel_error=3e-7) if r["method"] == "torch.cdist cuda" else r for r in rows]
    assert "max relative error" not in conclusion(close, summarize(close))


def test_kernels_rerender_with_device_cuda_writes_the_cuda_report(tmp_path, capsys):
    from vflsec.cli import main

    committed = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "kernels"
    shutil.copy(committed / "kernels-cuda.json", tmp_path / "kernels-cuda.json")
    assert main(["bench", "kernels", "--rerender", str(tmp_path), "--device", "cuda"]) == 0  # the GPU run alone
    text = (tmp_path / "kernels-cuda.md").read_text()
    assert "## Conclusion" in text and (tmp_path / "kernels-cuda.png").is_file()
    assert not (tmp_path / "kernels.md").exists()
    # Without --device cuda the folder has no kernels.json: one line saying to add the flag.
    with pytest.raises(SystemExit) as info:
        main(["bench", "kernels", "--rerender", str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "kernels-cuda.json" in err and "add --device cuda" in err
