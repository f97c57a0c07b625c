"""Benchmark grids and published numbers as shipped TOML: they load, validate,
equal the values that were hard-coded before they became data, round-trip
through --print-config, and --config changes what a run does."""
import dataclasses
import json

import pytest

from vflsec import cli
from vflsec.bench import config as C
from vflsec.bench.experiments.glm import grid as E
from vflsec.bench.experiments.he import grid as he
from vflsec.bench.experiments.kernels import grid as kernels
from vflsec.bench.experiments.network import grid as network
from vflsec.bench.experiments.network.jobs import job_table as network_job
from vflsec.bench.experiments.privacy import grid as privacy
from vflsec.bench.experiments.splitnn import dp as splitnn_dp
from vflsec.bench.experiments.splitnn import papers as splitnn_papers
from vflsec.bench.experiments.splitnn.grid import load_grid as load_splitnn_grid
from vflsec.bench.experiments.splitnn.papers import DP_VFL, FEDPASS, VFL_AFE

BENCHES = ("kernels", "glm", "he", "network", "privacy", "splitnn")


def _load_all(name, path=None):
    """Every variant of one benchmark's configuration (shipped, or the file ``path``)."""
    if name == "kernels":
        return [kernels.load_grid(q, path, device=d) for q in (False, True) for d in ("cpu", "cuda")]
    if name == "glm":
        return [E.load_config(q, path) for q in (False, True)]
    loader = {"he": he.load_grid, "network": network.load_grid, "privacy": privacy.load_grid,
              "splitnn": load_splitnn_grid}[name]
    return [loader(q, path) for q in (False, True)]


@pytest.mark.parametrize("name", BENCHES)
def test_every_shipped_config_loads_and_validates(name):
    grids = _load_all(name)
    assert all(dataclasses.is_dataclass(g) for g in grids)
    for g in grids:  # validating the loaded values again changes nothing
        assert C.validated(g) == g


def test_shipped_configs_are_package_data():
    """Read through importlib.resources (what an installed wheel has), one per benchmark."""
    from importlib import resources

    experiments = resources.files("vflsec.bench") / "experiments"
    for b in BENCHES:  # each benchmark's folder holds its grid
        assert (experiments / b / f"{b}.toml").is_file(), b
    papers = {p.name for p in (resources.files("vflsec.bench") / "papers").iterdir()}
    assert papers == {"hdp_vfl.toml", "vfl_afe.toml", "dp_vfl.toml", "fedpass.toml", "vflsec_targets.toml"}


# -- the values that were hard-coded before (written out as they were) ---------------------------
def test_kernels_defaults_equal_the_removed_literals():
    old_quick = dict(pairwise_n=1000, pairwise_d=[16, 64], stats_n=2000, stats_d=64, stats_big_n=None,
                     fcm_n=20000, fcm_d=16, fcm_c=10, fcm_iters=5, noise_n=10**6, release_n=10**6, cks_n=10**5,
                     python_n=2000, baseline_n=2000, repeats=3, threads=2, seed=0)
    old_full = dict(pairwise_n=4000, pairwise_d=[16, 64, 256], stats_n=10000, stats_d=64, stats_big_n=100000,
                    fcm_n=100000, fcm_d=16, fcm_c=10, fcm_iters=10, noise_n=10**7, release_n=10**7, cks_n=10**6,
                    python_n=20000, baseline_n=20000, repeats=7, threads=2, seed=0)
    for quick, old in ((True, old_quick), (False, old_full)):
        got = kernels.load_grid(quick).as_dict()
        # The release's (epsilon, delta) and the accuracy rows were constants (RELEASE_EPSILON, min(500, n)).
        assert got.pop("release_epsilon") == 1.0 and got.pop("release_delta") == 1e-5
        assert got.pop("pairwise_accuracy_rows") == 500
        assert got == old
    old_cuda_quick = dict(pairwise_n=1000, pairwise_d=[16, 64], stats_n=2000, stats_d=64, stats_big_n=None,
                          fcm_n=20000, fcm_d=16, fcm_c=10, fcm_iters=5, noise_n=10**6, repeats=3)
    old_cuda_full = dict(pairwise_n=8000, pairwise_d=[16, 64, 256], stats_n=10000, stats_d=64, stats_big_n=100000,
                         fcm_n=100000, fcm_d=16, fcm_c=10, fcm_iters=10, noise_n=10**8, repeats=7)
    for quick, old in ((True, old_cuda_quick), (False, old_cuda_full)):
        got = kernels.load_grid(quick, device="cuda").as_dict()
        assert got.pop("pairwise_accuracy_rows") == 500
        assert got.pop("seed") == 0  # the data seeds were the constants 0, 1, 2: default_rng(seed + k)
        assert got == old


def test_network_defaults_equal_the_removed_literals():
    def old_job(method, quick):
        job = dict(protocol=method, loss="logistic", lr=0.5, epochs=2 if quick else 3,
                   batch_size=64 if quick else 256, seed=0, active="active", passives=["passive1", "passive2"])
        if method == "hdp":
            job.update(epsilon=1.0, delta=0.01, noise_seed=1)
        if method in ("paillier", "ckks"):
            job.update(coordinator="coordinator", key_bits=2048)
        if method == "paillier" and quick:
            job.update(epochs=1)
        return job

    for quick in (True, False):
        grid = network.load_grid(quick)
        assert grid.methods == ("plain", "hdp", "paillier", "ckks")
        assert grid.parties == ("active", "passive1", "passive2")
        for method in grid.methods:
            new = network_job(method, grid)
            assert new == old_job(method, quick) and list(new) == list(old_job(method, quick))
        assert (grid.keep, grid.data_seed, grid.psi_overlap) == (0.95, 0, 0.5)
        assert dataclasses.asdict(grid.network) == dict(peer_timeout=30.0, heartbeat_interval=1.0,
                                                        connect_timeout=120.0)
    quick, full = network.load_grid(True), network.load_grid(False)
    assert (quick.dataset, quick.features_per_party, quick.rows, quick.psi_sizes) == ("synthetic", (4, 3, 3), 300,
                                                                                      (1000, 10000))
    assert (full.dataset, full.features_per_party, full.rows, full.psi_sizes) == ("adult", (6, 4, 4), 4000,
                                                                                  (10000, 100000))


def test_privacy_defaults_equal_the_removed_literals():
    old_quick_grid = {"none": [None], "noise_embedding": [0.3, 3.0], "noise_gradient": [0.003, 0.03],
                      "sparsify": [0.5, 0.1], "vfl_afe": [10.0, 1.0], "dp_sgd": [10.0, 1.0], "fedpass": [1.0, 9.0]}
    old_full_grid = {"none": [None], "noise_embedding": [0.1, 0.3, 1.0, 3.0],
                     "noise_gradient": [0.001, 0.003, 0.01, 0.03], "sparsify": [0.75, 0.5, 0.25, 0.1],
                     "vfl_afe": [100.0, 10.0, 1.0, 0.1], "dp_sgd": [100.0, 10.0, 1.0, 0.5],
                     "fedpass": [1.0, 5.0, 9.0, 25.0]}
    quick, full = privacy.load_grid(True), privacy.load_grid(False)
    assert quick.cells() == old_quick_grid and list(quick.cells()) == list(old_quick_grid)
    assert full.cells() == old_full_grid and list(full.cells()) == list(old_full_grid)
    assert (quick.datasets, full.datasets) == (("breast",), ("breast", "credit"))
    assert dataclasses.asdict(quick.train) == dict(epochs=15, batch_size=32, lr=5e-3)
    assert dataclasses.asdict(full.train) == dict(epochs=30, batch_size=32, lr=5e-3)
    assert (quick.max_rows, full.max_rows, quick.n_targets, full.n_targets) == (1200, 4000, 100, 300)
    assert (quick.shadow_models, full.shadow_models, quick.seed, full.seed) == (2, 4, 0, 0)
    # New with issue 39 (the literals were delta 1e-3 and the percentile clip, which has no guarantee):
    # a clip norm fixed before the run, and DPSGD's own delta rule (no delta key).
    assert dataclasses.asdict(quick.dp_sgd) == dataclasses.asdict(full.dp_sgd) == dict(clip=1.0, delta=None)
    assert (quick.glm.epochs, quick.glm.hdp_epsilons, quick.glm.encrypted) == (25, (1.0, 100.0), ("ckks",))
    assert (full.glm.epochs, full.glm.hdp_epsilons, full.glm.encrypted) == (25, (0.1, 1.0, 10.0, 100.0, 1000.0),
                                                                             ("ckks", "paillier"))


def test_he_defaults_equal_the_removed_literals():
    old_quick = dict(n_exp=100, n_add=2000, n_mul=400, dot_rows=400, dot_cols=10, repeats=3, min_total=0.3,
                     max_total=8.0, ckks_rows=400, tenseal_matmul_rows=400, epoch_n=2000, epoch_batch=400,
                     key_bits=[2048])
    old_full = dict(n_exp=400, n_add=10000, n_mul=2000, dot_rows=3200, dot_cols=10, repeats=5, min_total=1.0,
                    max_total=45.0, ckks_rows=3200, tenseal_matmul_rows=800, epoch_n=10000, epoch_batch=3200,
                    key_bits=[2048, 3072])
    assert he.load_grid(True).sizes() == old_quick and he.load_grid(True).seed == 0
    assert he.load_grid(False).sizes() == old_full and he.load_grid(False).seed == 0
    # run(epoch=True, ckks=True) were the defaults of the Python call; now grid keys.
    assert all(g.ckks and g.epoch for g in (he.load_grid(True), he.load_grid(False)))


def test_glm_defaults_equal_the_removed_literals():
    old_full = dict(datasets=("breast", "credit", "adult"), split_seeds=5, noise_draws=3,
                    epsilons=(0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0), cv_folds=5, test_size=0.2, max_rows=None,
                    seed=0, selection_mean_candidates=10.0, he_split_seeds=1, he_key_bits=2048, figure2=True,
                    runtime_sizes=(10000, 20000, 50000, 100000), runtime_epochs=(1, 2, 5, 10),
                    runtime_epochs_n=10000, runtime_batch_size=3200, runtime_paillier_3072=True, quick=False,
                    # Issue 25: the time budgets became configuration. The HE accuracy cells the committed
                    # run measured under its 900 s budget (Credit's were over it), and at most 14 Paillier
                    # batches per runtime cell: the batches it measured under its 60 s budget.
                    he_accuracy={"paillier": ("breast", "adult"), "ckks": ("breast", "adult")},
                    runtime_he_batches={"paillier": 14})
    old_quick = dict(old_full, datasets=("breast",), split_seeds=2, noise_draws=2,
                     epsilons=(0.01, 0.1, 1.0, 10.0, 100.0), figure2=True,
                     runtime_sizes=(1000, 2000), runtime_epochs=(1, 2), runtime_epochs_n=1000,
                     runtime_batch_size=250, runtime_paillier_3072=False, quick=True,
                     he_accuracy={"paillier": ("breast",), "ckks": ("breast",)}, runtime_he_batches={})
    # Former literals in the runner: the runtime grid's methods and Adult's block widths.
    grids = dict(learning_rate=2.0, grid_batch_sizes=(256, 1024, 3200), grid_epochs=(5, 10, 15),
                 grid_k=(0.1, 0.3, 1.0, 3.0, 10.0), plain_extra_batch_sizes=(32, 64),
                 runtime_methods=("plain", "hdp", "ckks", "paillier"), runtime_features=(35, 73))
    # Issue 26 added the HE+DP runtime cells and the DP spectrum's grids (new keys, no former literals).
    dp_runtime = dict(runtime_methods=("plain", "hdp", "ckks", "paillier", "ckks_dp", "paillier_dp"))
    # The secret-sharing MPC rows (new keys): semi2k and cheetah in full, semi2k alone in quick.
    mpc_full = dict(runtime_methods=dp_runtime["runtime_methods"] + ("mpc_semi2k", "mpc_cheetah"),
                    mpc_accuracy={"mpc_semi2k": ("breast", "adult"), "mpc_cheetah": ("breast", "adult")},
                    runtime_mpc_batches={"mpc_cheetah": 8})
    mpc_quick = dict(runtime_methods=dp_runtime["runtime_methods"] + ("mpc_semi2k",),
                     mpc_accuracy={"mpc_semi2k": ("breast",)}, runtime_mpc_batches={})
    # The spectrum's MPC+DP cells (new keys): semi2k on Breast and Adult at three epsilons, cheetah on Breast at
    # one; in quick semi2k on Breast at epsilon 1.
    mpc_full["mpc_dp_accuracy"] = {"mpc_dp_semi2k": ("breast", "credit", "adult")}
    mpc_full["mpc_dp_accuracy_epsilons"] = {"mpc_dp_semi2k": (1.0,)}
    mpc_quick.update(mpc_dp_accuracy={"mpc_dp_semi2k": ("breast",)}, mpc_dp_accuracy_epsilons={"mpc_dp_semi2k": (1.0,)})
    spectrum = dict(spectrum_epsilons=(0.1, 1.0, 10.0), spectrum_deltas=(1e-5, 0.01), central_sgd_momentum=0.9,
                    central_sgd_epochs=(5, 15), central_sgd_lr=(0.5, 2.0), central_output_lam_scales=(0.3, 1.0, 3.0),
                    opacus_epsilons=(1.0,))
    spectrum_full = dict(spectrum, central_sgd_sampling_rates=(0.01, 0.0625), central_objective_lams=(1e-5, 1e-4, 1e-3),
                         he_dp_batch_sizes=(1024, 3200), he_dp_epochs=(2, 5, 10), he_dp_k=(2.0, 3.0, 5.0),
                         he_dp_accuracy={"paillier_dp": ("breast", "adult"), "ckks_dp": ("breast", "adult")},
                         he_dp_accuracy_epsilons={"paillier_dp": (1.0,), "ckks_dp": (0.1, 1.0, 10.0)})
    spectrum_quick = dict(spectrum, spectrum_deltas=(1e-5,), central_sgd_epochs=(5,), central_output_lam_scales=(1.0,),
                          central_sgd_sampling_rates=(0.0625,), central_objective_lams=(1e-3,),
                          he_dp_batch_sizes=(1024,), he_dp_epochs=(2, 5), he_dp_k=(3.0, 5.0),
                          he_dp_accuracy={"paillier_dp": ("breast",), "ckks_dp": ("breast",)},
                          he_dp_accuracy_epsilons={"paillier_dp": (1.0,), "ckks_dp": (1.0,)})
    old_full["runtime_he_batches"] = {"paillier": 14, "paillier_dp": 14}
    full = E.GLMBenchConfig(**old_full, **{**grids, **dp_runtime, **mpc_full}, **spectrum_full)
    quick = E.GLMBenchConfig(**old_quick, **{**grids, **dp_runtime, **mpc_quick}, **spectrum_quick)
    assert E.load_config(False) == full == E.GLMBenchConfig()
    assert E.load_config(True) == quick == E.GLMBenchConfig.quick_run()
    # The hyperparameter grids, built as they were.
    lr = 2.0
    wide = tuple(E.HyperParams(lr, e, b, k) for b in (256, 1024, 3200) for e in (5, 10, 15)
                 for k in (0.1, 0.3, 1.0, 3.0, 10.0))
    plain = wide + tuple(E.HyperParams(lr, e, b, k) for b in (32, 64) for e in (5, 10, 15)
                         for k in (0.1, 0.3, 1.0, 3.0, 10.0))
    assert E.WIDE_GRID == wide and E.PLAIN_GRID == plain
    assert E.PAPER_GRID == tuple(h for h in wide if h.batch_size == 3200 and h.k <= 1.0)
    assert E.FIGURE2_GRID == tuple(E.HyperParams(lr, e, 3200, k) for e in (5, 10, 15) for k in (0.1, 0.3, 0.5))
    # HDP-VFL's settings and its Figure 2 claims (configs/papers/hdp_vfl.toml).
    assert (E.LAM, E.DELTA, E.LEARNING_RATE) == (0.001, 0.01, 2.0)
    assert E.PAPER_FIG1 == E.HyperParams(2.0, 10, 3200, 1.0) and E.PAPER.figure2.epsilon == 1.0
    assert E.PAPER_FIGURE2_TEXT == {"e=5": 0.9, "e=15": 0.6, "k=0.1": 0.5, "k=0.5": 0.9}


def test_splitnn_defaults_equal_the_removed_literals():
    def old_config(quick, seeds):
        # device and quick were recorded here too; now the run adds them (not grid keys)
        common = dict(t=10.0, epsilon={"tabular": 5.0, "image": 20.0}, calibration="analytic", kl_weight=0.01,
                      contrastive_weight=0.1,
                      confidence_threshold={"tabular": 0.8, "image": 0.5}, lr={"tabular": 1e-3, "image": 1e-3})
        if quick:
            return dict(common, epochs=3, batch_size=128, seeds=seeds or 1, adult_rows=(3000, 1000),
                        mnist_rows=(2000, 1000), timing_rows=1024, timing_batch_size=128, timing_epochs=2,
                        timing_rounds=2,
                        dp_vfl=dict(datasets=("energy",), owners=(3,), epsilons=(1.0, 10.0, 100.0), clips=(1.0,),
                                    epochs=5, batch_size=100, lr=0.05, max_rows=1000),
                        fedpass=dict(settings=((100.0, 5.0),), epochs=2, max_rows=2000),
                        rescale=dict(seeds=seeds or 1))
        fedpass_settings = ((2.0, 1.0), (10.0, 1.0), (50.0, 1.0), (100.0, 1.0), (200.0, 1.0),
                            (100.0, 5.0), (100.0, 9.0), (100.0, 25.0), (100.0, 64.0))
        return dict(common, epochs=20, batch_size=128, seeds=seeds or 1, adult_rows=(None, None),
                    mnist_rows=(10000, 2000), timing_rows=5000, timing_batch_size=256, timing_epochs=3,
                    timing_rounds=3,
                    dp_vfl=dict(datasets=("adult", "energy", "california_housing"), owners=(3, 4, 5),
                                epsilons=(1.0, 1.5, 2.0, 5.0, 10.0, 50.0, 100.0), clips=(1.0,), epochs=10,
                                batch_size=100, lr=0.05, max_rows=10000),
                    fedpass=dict(settings=fedpass_settings, epochs=10, max_rows=10000),
                    rescale=dict(seeds=seeds or 2))

    for quick in (True, False):
        for seeds in (None, 3):
            new = load_splitnn_grid(quick, seeds=seeds).run_settings()
            # --sections and --seed were flags with these defaults; now grid keys (noise_seed None: OS entropy).
            # clips is new (issue 39): DP-SGD's clip fixed at C = 1 before the run, where the paper's percentile was.
            old = dict(old_config(quick, seeds), sections=("table2", "table3", "dp_vfl", "fedpass"), noise_seed=None)
            assert json.dumps(new) == json.dumps(old)  # values, types as JSON records them, and key order


def test_split_learning_papers_equal_the_removed_literals():
    assert splitnn_papers.PAPER_TABLE2 == {"adult": {"vanilla": 77.16, "R": 79.02, "D": 77.70, "full": 79.31},
                                           "mnist": {"vanilla": 90.48, "R": 95.12, "D": 92.51, "full": 96.53}}
    assert splitnn_papers.PAPER_TABLE3 == {"base": (349.89, 45.32), "noise": (60.43, 7.83), "rescale": (279.76, 36.23),
                                           "adjust": (82.04, 10.63)}
    assert list(splitnn_papers.PAPER_TABLE3) == list(splitnn_papers.TIMING_STEPS)
    assert VFL_AFE.table3["base"].ms == 349.89
    assert splitnn_dp.DP_VFL_EPSILONS == (1.0, 1.5, 2.0, 5.0, 10.0, 50.0, 100.0)
    assert splitnn_dp.DP_VFL_OWNERS == (3, 4, 5) and splitnn_dp.DP_VFL_DELTA == 1e-3
    assert splitnn_dp.FEDPASS_SETTINGS == ((2.0, 1.0), (10.0, 1.0), (50.0, 1.0), (100.0, 1.0), (200.0, 1.0),
                                           (100.0, 5.0), (100.0, 9.0), (100.0, 25.0), (100.0, 64.0))
    # The estimator factories' defaults are the papers' training settings.
    import inspect

    dp_defaults = inspect.signature(splitnn_dp.dp_vfl_estimator_factory).parameters
    t = DP_VFL.training
    assert (t.epochs, t.batch_size, t.lr, t.optimizer) == tuple(
        dp_defaults[k].default for k in ("epochs", "batch_size", "lr", "optimizer"))
    fp_defaults = inspect.signature(splitnn_dp.fedpass_estimator_factory).parameters
    t = FEDPASS.training
    assert (t.epochs, t.batch_size, t.lr, t.optimizer) == tuple(
        fp_defaults[k].default for k in ("epochs", "batch_size", "lr", "optimizer"))


# -- mistakes in a config file ------------------------------------------------------------------
def _shipped_copy(tmp_path, name, edit=lambda text: text):
    path = tmp_path / f"{name}.toml"
    path.write_text(edit(C.shipped_config_text(name)))
    return path


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace("repeats = 3\n", "repeats = 3\nrepeatz = 3\n", 1), ["[quick]", "unknown key 'repeatz'",
                                                                          "allowed:", "repeats"]),
    (lambda t: t.replace("pairwise_n = 1000", 'pairwise_n = "1000"', 1), ["[quick]", "pairwise_n",
                                                                          "expected an integer >= 2", "'1000'"]),
    (lambda t: t.replace("fcm_iters = 5", "fcm_iters = 0", 1), ["[quick]", "fcm_iters", "expected an integer >= 1",
                                                                "got 0"]),
    (lambda t: t.replace("release_delta = 1e-5\ncks_n = 100_000", "release_delta = 2.0\ncks_n = 100_000", 1),
     ["[quick]", "release_delta", "<= 1", "got 2.0"]),
    (lambda t: t.replace("pairwise_d = [16, 64]", "pairwise_d = [16, true]", 1), ["[quick]", "pairwise_d[1]"]),
    (lambda t: t.replace("noise_n = 1_000_000\nrelease_n", "release_n", 1), ["[quick]", "noise_n", "missing"]),
    (lambda t: t + "\n[extra]\nx = 1\n", ["unknown table or key 'extra'", "[full]", "[quick]"]),
    (lambda t: t.replace("\n[quick]\n", "\n[quick\n", 1), ["not valid TOML"]),
])
def test_a_bad_kernels_config_names_file_table_and_key(tmp_path, edit, words):
    path = _shipped_copy(tmp_path, "kernels", edit)
    with pytest.raises(C.BenchConfigError) as info:
        kernels.load_grid(True, path)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_a_bad_value_in_another_variant_or_a_nested_table_is_reported(tmp_path):
    path = _shipped_copy(tmp_path, "kernels", lambda t: t.replace("noise_n = 100_000_000", "noise_n = -1"))
    with pytest.raises(C.BenchConfigError, match=r"\[cuda\.full\] noise_n: expected an integer >= 1"):
        kernels.load_grid(True, path)  # the quick CPU grid is fine, the file is not
    path = _shipped_copy(tmp_path, "network", lambda t: t.replace('loss = "logistic"', 'loss = "hinge"', 1))
    with pytest.raises(C.BenchConfigError, match=r"\[full\.job\] loss: expected one of 'logistic'"):
        network.load_grid(False, path)
    path = _shipped_copy(tmp_path, "privacy", lambda t: t.replace("sparsify = [0.5, 0.1]", "sparsify_x = [0.5]"))
    with pytest.raises(C.BenchConfigError, match=r"\[quick\] strengths: unknown key 'sparsify_x'; allowed: "
                                                 r"noise_embedding"):
        privacy.load_grid(True, path)
    path = _shipped_copy(tmp_path, "network", lambda t: t.replace("features_per_party = [4, 3, 3]",
                                                                  "features_per_party = [4, 3]"))
    with pytest.raises(C.BenchConfigError, match=r"\[quick\] features_per_party has 2 entries for 3 parties"):
        network.load_grid(True, path)


@pytest.mark.parametrize("bad, value", [("0", 0), ("-1", -1), ('"q80"', "q80"), ('"p0"', "p0"), ('"p101"', "p101")])
def test_a_bad_dp_sgd_clip_is_refused_with_the_rule(tmp_path, bad, value):
    """DP-SGD's clip (splitnn's [dp_vfl] clips, privacy's [dp_sgd] clip): a clip norm > 0 or "pNN", 0 < NN <= 100."""
    rule = "expected a clip norm C > 0 (a number, fixed before the run) or 'pNN' with 0 < NN <= 100"
    path = _shipped_copy(tmp_path, "splitnn", lambda t: t.replace("clips = [1.0]\nepochs = 5",
                                                                  f'clips = [1.0, "p80", {bad}]\nepochs = 5'))
    with pytest.raises(C.BenchConfigError) as info:
        load_splitnn_grid(False, path)  # the full grid is fine, the [quick] one is not
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message
    assert f"[quick.dp_vfl] clips[2]: {rule}" in message and message.endswith(f"got {value!r}"), message
    path = _shipped_copy(tmp_path, "privacy", lambda t: t.replace("[quick.dp_sgd]\nclip = 1.0",
                                                                  f"[quick.dp_sgd]\nclip = {bad}"))
    with pytest.raises(C.BenchConfigError) as info:
        privacy.load_grid(True, path)
    assert f"[quick.dp_sgd] clip: {rule}" in str(info.value) and str(info.value).endswith(f"got {value!r}")


def test_dp_sgd_clips_accept_numbers_and_percentiles():
    grid = load_splitnn_grid(True)
    assert grid.dp_vfl.clips == (1.0,) and load_splitnn_grid(False).dp_vfl.clips == (1.0,)
    changed = C.with_overrides(grid, "test", dp_vfl=dataclasses.replace(grid.dp_vfl, clips=(2, "p80", "p99.5")))
    assert changed.dp_vfl.clips == (2.0, "p80", "p99.5")
    with pytest.raises(C.BenchConfigError, match=r"clips: each clip at most once"):
        C.with_overrides(grid, "test", dp_vfl=dataclasses.replace(grid.dp_vfl, clips=(1.0, 1)))


def test_cli_config_mistakes_are_one_line_with_exit_code_2(tmp_path, capsys):
    path = _shipped_copy(tmp_path, "network", lambda t: t.replace("rows = 300", "rows = 1", 1))
    with pytest.raises(SystemExit) as info:
        cli.main(["bench", "network", "--quick", "--config", str(path), "--out", str(tmp_path / "out")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("vflsec bench network: error: ")
    assert "[quick] rows: expected an integer >= 2, got 1" in err
    with pytest.raises(SystemExit) as info:
        cli.main(["bench", "he", "--config", str(tmp_path / "absent.toml")])
    assert info.value.code == 2 and "cannot read configuration" in capsys.readouterr().err
    # A flag that overrides the config is validated like the file.
    with pytest.raises(SystemExit) as info:
        cli.main(["bench", "network", "--quick", "--methods", "plain,smoke", "--out", str(tmp_path / "out")])
    assert info.value.code == 2 and "methods[1]: expected one of 'plain'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# -- --print-config ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", BENCHES)
def test_print_config_round_trips(name, tmp_path, capsys):
    assert cli.main(["bench", name, "--print-config"]) == 0
    printed = capsys.readouterr().out
    assert printed == C.shipped_config_text(name)
    path = tmp_path / "copy.toml"
    path.write_text(printed)
    assert _load_all(name, path) == _load_all(name)


def test_default_outputs_are_under_bench_out_not_the_committed_results():
    from vflsec.bench.registry import load_experiment

    for name in BENCHES:
        args = cli._build_parser(["bench", name]).parse_args(["bench", name])
        assert args.out is None and args.config is None and args.print_config is False
        out = load_experiment(name).default_out()  # where a run without --out writes
        assert out.parts[0] == "bench-out" and out.name == name, (name, out)


# -- --config changes the run -----------------------------------------------------------------------
def _tiny_kernels(text: str, pairwise_d: str) -> str:
    """The shipped [quick] grid shrunk to seconds (every case still runs)."""
    quick = text.index("\n[quick]\n")
    head, tail = text[:quick], text[quick:]
    cuda = tail.index("[cuda.full]")
    table, rest = tail[:cuda], tail[cuda:]
    for old, new in (("repeats = 3", "repeats = 1"), ("pairwise_n = 1000", "pairwise_n = 60"),
                     ("pairwise_d = [16, 64]", f"pairwise_d = {pairwise_d}"), ("stats_n = 2000", "stats_n = 60"),
                     ("stats_d = 64", "stats_d = 4"), ("fcm_n = 20000", "fcm_n = 300"), ("fcm_d = 16", "fcm_d = 3"),
                     ("fcm_c = 10", "fcm_c = 3"), ("fcm_iters = 5", "fcm_iters = 2"),
                     ("noise_n = 1_000_000", "noise_n = 2000"), ("release_n = 1_000_000", "release_n = 2000"),
                     ("cks_n = 100_000", "cks_n = 200"), ("python_n = 2000", "python_n = 20"),
                     ("baseline_n = 2000", "baseline_n = 20")):
        assert old in table, old
        table = table.replace(old, new, 1)
    return head + table + rest


@pytest.mark.slow
def test_config_with_an_edited_value_changes_that_cell_and_renders_from_json(tmp_path):
    shipped = C.shipped_config_text("kernels")
    cases = {}
    for label, dims in (("a", "[4]"), ("b", "[6]")):
        path = tmp_path / f"{label}.toml"
        path.write_text(_tiny_kernels(shipped, dims))
        out = tmp_path / f"out-{label}"
        assert cli.main(["bench", "kernels", "--quick", "--config", str(path), "--seed", "3", "--out", str(out)]) == 0
        result = json.loads((out / "kernels.json").read_text())
        assert result["config"]["seed"] == 3 and result["config"]["pairwise_n"] == 60  # flag over file
        cases[label] = {r["case"] for r in result["results"] if r["kernel"] == "pairwise_distances"}
        # The renderer needs nothing but results.json: re-rendering gives the same report.
        report = (out / "kernels.md").read_text()
        (out / "kernels.md").unlink()
        assert cli.main(["bench", "kernels", "--rerender", str(out)]) == 0
        assert (out / "kernels.md").read_text() == report
        assert "## Conclusion" in report and "as fast as the fastest alternative" in report
    assert cases["a"] == {"float32 n=m=60 d=4 Y=X", "float32 n=m=60 d=4 Y independent"}
    assert cases["b"] == {"float32 n=m=60 d=6 Y=X", "float32 n=m=60 d=6 Y independent"}
