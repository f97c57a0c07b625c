"""The privacy benchmark's pieces on a tiny split run: adversary views come
only from messages addressed to the adversary; rows follow the schema."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vflsec.attacks import active_party_embeddings, direct_label_inference, passive_party_gradients  # noqa: E402
from vflsec.bench.experiments.privacy import cells as P  # noqa: E402
from vflsec.bench.experiments.privacy.scoring import cap_table  # noqa: E402
from vflsec.bench.experiments.privacy.training import load_privacy_data, train_split  # noqa: E402

torch.set_num_threads(1)
KW = dict(epochs=2, batch_size=32, lr=5e-3)


@pytest.fixture(scope="module")
def data():
    return load_privacy_data("breast", data_dir=None, max_rows=300, seed=0)


def test_views_are_the_messages_addressed_to_each_adversary(data):
    model = train_split("none", None, data.Xp_train, data.Xa_train, data.y_train, seed=0, **KW)
    grads = passive_party_gradients(model.transcript, model.job)
    embeds = active_party_embeddings(model.transcript, model.job)
    assert len(grads) == len(embeds) == model.job.epochs * model.job.steps_per_epoch
    to_passive = [p for r, p in model.transcript if r.receiver == "passive"]
    to_active = [p for r, p in model.transcript if r.receiver == "active"]
    assert all(np.array_equal(g, m) for (_, _, g), m in zip(grads, to_passive))
    assert all(np.array_equal(h, m) for (_, _, h), m in zip(embeds, to_active))
    # Batch rows follow the public schedule: each epoch covers every training row once.
    rows = np.concatenate([idx for epoch, idx, _ in grads if epoch == 0])
    assert np.array_equal(np.sort(rows), np.arange(len(data.y_train)))


def test_direct_label_on_the_real_trainer_with_a_softmax_head(data):
    model = train_split("none", None, data.Xp_train, data.Xa_train, data.y_train, seed=0, logits_head=True, **KW)
    _, idx, g = passive_party_gradients(model.transcript, model.job)[-1]
    assert np.mean(direct_label_inference(g).labels == data.y_train[idx]) >= 0.99
    noisy = train_split("noise_gradient", 0.1, data.Xp_train, data.Xa_train, data.y_train, seed=0,
                          logits_head=True, **KW)
    _, idx, g = passive_party_gradients(noisy.transcript, noisy.job)[-1]
    assert np.mean(direct_label_inference(g).labels == data.y_train[idx]) < 0.8


def test_split_attack_rows_follow_the_schema_and_cap(data):
    model = train_split("noise_embedding", 0.3, data.Xp_train, data.Xa_train, data.y_train, seed=0, **KW)
    rows = P.split_attacks(model, data, kind="noise_embedding", strength=0.3, train_kw=KW, n_targets=20,
                           shadow_models=1, seed=0)
    keys = {"dataset", "defense", "strength", "epsilon_composed", "attack", "metric", "value", "main_accuracy"}
    assert all(keys <= set(r) for r in rows)
    assert {r["attack"] for r in rows} == {"model_inversion_blackbox", "model_inversion_whitebox", "norm_scoring",
                                           "direction_scoring", "model_completion", "membership_shadow"}
    caps = cap_table(rows)
    by_attack = {c["attack"]: c["cap"] for c in caps}
    mse = next(r for r in rows if r["attack"] == "model_inversion_blackbox" and r["metric"] == "mse")
    assert by_attack["model_inversion_blackbox"] == pytest.approx(mse["main_accuracy"] * mse["value"])
    mc = next(r for r in rows if r["attack"] == "model_completion")
    assert by_attack["model_completion"] == pytest.approx(mc["main_accuracy"] * (1 - mc["value"]))


def test_dp_sgd_rows_carry_their_clip_and_delta_and_the_report_labels_them(data, tmp_path):
    """The default dp_sgd cell (clip C = 1 fixed before the run, DPSGD's delta rule) has a
    guarantee; the percentile clip ("p80") none, and a delta of at least 1/n is warned
    about and labelled in the report, not silenced."""
    import dataclasses

    from vflsec.bench.config import with_overrides
    from vflsec.bench.experiments.privacy.grid import DPSGDSettings, load_grid
    from vflsec.bench.experiments.privacy.report import write_report
    from vflsec.dp import PrivacyWarning, default_delta

    grid = load_grid(True)
    assert grid.dp_sgd == DPSGDSettings(clip=1.0, delta=None)

    def rows_of(g):
        kw = dict(KW, epochs=1, defense_settings={"dp_sgd": g.dp_sgd.defense_kwargs()})
        model = train_split("dp_sgd", 2.0, data.Xp_train, data.Xa_train, data.y_train, seed=0, **kw)
        return P.split_attacks(model, data, kind="dp_sgd", strength=2.0, train_kw=kw, n_targets=10,
                               shadow_models=0, seed=0)

    rows = rows_of(grid)
    row = rows[0]
    assert all(r["variant"] == "clip=1" and r["epsilon_composed"] == row["epsilon_composed"] for r in rows)
    assert 1.9 < row["epsilon_composed"] <= 2.0
    assert row["delta"] == default_delta(len(data.y_train)) and row["privacy_warning"] is None
    weak_grid = with_overrides(grid, "test", dp_sgd=dataclasses.replace(grid.dp_sgd, clip="p80", delta=0.01))
    with pytest.warns(PrivacyWarning, match="at least 1/n"):  # 150 training rows
        weak_rows = rows_of(weak_grid)
    weak = weak_rows[0]
    assert weak["variant"] == "clip=p80" and weak["epsilon_composed"] is None and weak["delta"] == 0.01
    assert all("delta=0.01 is at least 1/n" in r["privacy_warning"] for r in weak_rows)

    def report(g, rows):
        result = {"settings": P.settings(g, True), "attacks": rows, "cap": [], "git": "x", "dp_layer": 1,
                  "machine": {"cpu": "x", "logical_cores": 2}}
        write_report(result, tmp_path, [])
        return (tmp_path / "report.md").read_text()

    text = report(grid, rows)
    assert ("DP-SGD clip: C = 1, fixed before the run, not read from the data; delta: DPSGD's default "
            "min(1e-5, 1/(10 n)) for the n training rows; in force: breast 1e-05.") in text
    assert f"| breast | dp_sgd | 2 | {row['epsilon_composed']:.4g}" in text and "PrivacyWarning" not in text
    text = report(weak_grid, weak_rows)
    assert ("DP-SGD clip: the 80th percentile of the per-sample gradient norms over the first 10 steps (clip=p80), "
            "which reads the gradients the noise protects") in text
    assert "delta: the configured delta = 0.01; in force: breast 0.01." in text
    assert "| breast | dp_sgd | 2 | no guarantee (PrivacyWarning, below) |" in text
    assert "their training raised a PrivacyWarning" in text and "delta=0.01 is at least 1/n" in text


TINY_GRID = """
[full]
datasets = ["breast"]
seed = 0
max_rows = 120
undefended = true
n_targets = 10
shadow_models = 0
train = {epochs = 1, batch_size = 32, lr = 5e-3}
strengths = {sparsify = [0.5]}
dp_sgd = {clip = 1.0}
glm = {epochs = 1, hdp_epsilons = [], encrypted = []}
"""


def test_interrupted_privacy_run_writes_the_finished_cells_marked_partial(tmp_path, monkeypatch, capsys):
    """Ctrl-C during the equality-solving cells, after the real split-learning cells finished:
    the runner writes those cells (marked partial) and their report, and exits 130."""
    import json

    from vflsec.cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
        yield  # a generator, like the cells it stands in for

    (tmp_path / "tiny.toml").write_text(TINY_GRID)
    monkeypatch.setattr(P, "glm_cells", interrupted)
    with pytest.raises(SystemExit) as info:
        main(["bench", "privacy", "--config", str(tmp_path / "tiny.toml"), "--out", str(tmp_path / "out")])
    assert info.value.code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("vflsec bench privacy: interrupted")
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["partial"] is True and saved["benchmark"] == "privacy" and saved["dp_layer"] == 1
    # Both split cells (undefended, sparsify 0.5) finished; no equality-solving row did.
    assert {(r["defense"], r["strength"]) for r in saved["attacks"]} == {("none", None), ("sparsify", 0.5)}
    assert saved["cap"] == cap_table(saved["attacks"]) and saved["cap"]
    assert saved["config"]["strengths"] == {"sparsify": [0.5]} and saved["settings"]["max_rows"] == 120
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Partial run" in report and "| breast | sparsify | 0.5 |" in report


def test_privacy_conclusion_names_the_defense_that_hurts_each_attack_within_the_accuracy_budget():
    from vflsec.bench.experiments.privacy.report import conclusion

    def row(defense, strength, value, acc):
        return {"dataset": "d", "defense": defense, "strength": strength, "attack": "norm_scoring",
                "metric": "accuracy", "value": value, "main_accuracy": acc}

    rows = [row("none", None, 0.9, 0.95), row("noise_gradient", 0.01, 0.55, 0.94),
            row("noise_gradient", 0.1, 0.50, 0.80)]  # the stronger one costs 15 points: not listed
    text = "\n".join(conclusion(rows))
    assert "## Conclusion" in text
    assert "norm_scoring (accuracy): 0.9 undefended, 0.55 with noise_gradient at strength 0.01" in text


@pytest.mark.parametrize("flags, words", [
    (["--datasets", "breast,nosuch"], "datasets[1]: expected one of 'breast', 'credit', 'adult', got 'nosuch'"),
    (["--datasets", "credit"], "credit dataset: file 'UCI_Credit_Card.csv'"),
])
def test_a_bad_dataset_is_refused_in_one_line_before_any_work(tmp_path, capsys, monkeypatch, flags, words):
    from vflsec.cli import main

    monkeypatch.delenv("VFLSEC_DATA", raising=False)
    with pytest.raises(SystemExit) as info:
        main(["bench", "privacy", "--quick", "--data-dir", str(tmp_path), "--out", str(tmp_path / "out"), *flags])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("vflsec bench privacy: error: ") and words in err, err
    assert not (tmp_path / "out").exists()
