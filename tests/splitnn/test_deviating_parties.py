"""Split learning with a party that deviates (issue 39): what it reads of the other's data, per
defense, measured against what a party that follows the protocol reads. The active party reads a
passive party's columns from its embeddings; a passive party reads the labels from its gradients.

The attacker. The active party knows the passive party's columns of some aligned rows (100 of 569
here: customers it holds both records of); the other 469 rows are the targets. Following the
protocol it still reads every embedding it receives and inverts them with a decoder fitted on its
known rows ("observe"). Deviating, it returns no gradient of its loss: for a known row it returns the
gradient of its decoder's error ``||D h - x||^2`` on that row, for any other row zero, so the passive
party trains its bottom model into an encoder its decoder inverts (feature-space hijacking, Pasquini
et al., CCS 2021, with known rows in place of a GAN). Every gradient it sends is float32, finite and of
the embedding's shape: the passive party accepts it. Both attackers end alike: each row's embeddings
of the second half of the run averaged, a ridge decoder fitted on the known rows, applied to the
targets. Scores: the feature error relative to the column-mean guess (1: nothing learned;
:func:`vflsec.attacks.normalized_feature_mse`) and how often the reconstruction is nearer the target's
own columns than another target's (0.5: chance).

What bounds it. Only VFL-AFE releases each embedding through a DP mechanism (clipped to t, noised by
the passive party), whatever the active party returns. With a hijacker, only the known rows train the
bottom model, so each target's releases are the mechanism's output on an encoder that does not read
it: telling the target's columns from another row's is bounded by the run's (epsilon, delta),
``(e^eps + delta) / (1 + e^eps)``. DP-SGD's epsilon covers the bottom model's weights, not the
embeddings the active party receives; the noise defenses and FedPass claim no guarantee.

The passive party. It knows the labels of 40 rows. Following the protocol, it scores every other row
by the cosine of its gradient with the known rows' gradients of the same batch (signed by their labels),
summed over the epochs. Deviating, it sends the same embedding (zeros) for every row, so that, with no
columns at the active party, every row's gradient is one of two vectors set by its label alone.
"""
from __future__ import annotations

import copy
import functools
import math
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Tuple

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.linear_model import RidgeCV  # noqa: E402

from vflsec.attacks import normalized_feature_mse  # noqa: E402
from vflsec.splitnn import SplitNNClassifier, trainer  # noqa: E402
from vflsec.splitnn.defenses import (  # noqa: E402
    DPSGD,
    VFLAFE,
    BatchInfo,
    DefenseContext,
    FedPass,
    GaussianEmbeddingNoise,
    GaussianGradientNoise,
    GradientSparsification,
    NoDefense,
)
from vflsec.splitnn.job import TAG_EMBEDDING, TAG_GRADIENT, SplitPartyResult  # noqa: E402
from vflsec.splitnn.models import mlp_bottom  # noqa: E402
from vflsec.vfl.received import check_received_array  # noqa: E402

EPOCHS = 30
KNOWN_ROWS = 100
BATCH = 64
LR = 0.01


def _data():
    """Breast cancer, standardised: the passive party holds the ten "mean" columns, the active party the labels."""
    X, y = load_breast_cancer(return_X_y=True)
    X = ((X - X.mean(axis=0)) / X.std(axis=0)).astype(np.float32)
    rng = np.random.default_rng(0)
    known = np.sort(rng.choice(len(y), KNOWN_ROWS, replace=False))
    return X[:, :10].copy(), y, known


PASSIVE, LABELS, KNOWN = _data()
TARGETS = np.setdiff1d(np.arange(len(LABELS)), KNOWN)


def _other_targets() -> np.ndarray:
    """For each target, another target (a fixed permutation without fixed points)."""
    rng = np.random.default_rng(1)
    while True:
        other = rng.permutation(len(TARGETS))
        if not np.any(other == np.arange(len(TARGETS))):
            return other


OTHER = _other_targets()


@dataclass
class Reading:
    nmse: float           # feature error of the targets / the column-mean guess's
    pair_accuracy: float  # reconstruction nearer the target's own columns than another target's


def _read(embeddings: Dict[int, list]) -> Reading:
    """The attacker's reconstruction of the targets from each row's averaged embeddings and its known rows."""
    H = np.stack([np.mean(embeddings[i], axis=0) for i in range(len(LABELS))])
    decoder = RidgeCV(alphas=np.logspace(-4, 4, 17)).fit(H[KNOWN], PASSIVE[KNOWN])
    guess = decoder.predict(H[TARGETS])
    truth = PASSIVE[TARGETS]
    own = ((guess - truth) ** 2).sum(axis=1)
    other = ((guess - truth[OTHER]) ** 2).sum(axis=1)
    return Reading(normalized_feature_mse(truth, guess), float(np.mean(own < other)))


def _kept(job, batch) -> bool:
    """The releases the attacker averages: the second half of the run."""
    return batch.epoch >= job.epochs // 2


def _observing(seen: Dict[int, list]):
    """The active party's own program, recording every embedding it receives."""
    def program(endpoint, job, data):
        schedule = iter(list(trainer._batches(job)))
        recv = endpoint.recv

        def recording(sender, tag, *args, **kwargs):
            value = recv(sender, tag, *args, **kwargs)
            if tag == TAG_EMBEDDING:
                batch = next(schedule)
                if _kept(job, batch):
                    for row, h in zip(batch.indices, np.asarray(value)):
                        seen.setdefault(int(row), []).append(h)
            return value

        endpoint.recv = recording
        return trainer.active_program(endpoint, job, data)
    return program


def _hijacking(seen: Dict[int, list]):
    """An active party that returns its decoder's gradient on the known rows and zero on the others."""
    def program(endpoint, job, data):
        passive = job.passives[0]
        known = torch.from_numpy(PASSIVE[KNOWN])
        slot = np.full(job.n_samples, -1)
        slot[KNOWN] = np.arange(len(KNOWN))
        decoder = optimizer = None
        for batch in trainer._batches(job):
            h = check_received_array(endpoint.recv(passive, TAG_EMBEDDING), receiver=endpoint.name, sender=passive,
                                     tag=TAG_EMBEDDING, step=batch.global_step, dtype=np.float32,
                                     shape=(len(batch.indices), None), what="embedding")
            if decoder is None:  # its own decoder, drawn from its own generator (the party threads share torch's)
                decoder = torch.nn.Linear(h.shape[1], known.shape[1])
                with torch.no_grad():
                    init = np.random.default_rng(2).normal(0.0, h.shape[1] ** -0.5, (known.shape[1], h.shape[1]))
                    decoder.weight.copy_(torch.from_numpy(init.astype(np.float32)))
                    decoder.bias.zero_()
                optimizer = torch.optim.Adam(decoder.parameters(), lr=0.01)
            rows = slot[batch.indices]
            mine = rows >= 0
            grad = np.zeros_like(h)
            if mine.any():
                received = torch.from_numpy(h).requires_grad_(True)
                loss = ((decoder(received[torch.from_numpy(mine)]) - known[rows[mine]]) ** 2).sum(dim=1).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                grad = received.grad.numpy()
            endpoint.send(passive, TAG_GRADIENT, np.ascontiguousarray(grad, dtype=np.float32))
            if _kept(job, batch):
                for row, value in zip(batch.indices, h):
                    seen.setdefault(int(row), []).append(value)
        zeros = [0.0] * job.epochs
        return SplitPartyResult(party=endpoint.name, role="active", head=data.head, defense=data.defense,
                                history={"loss": zeros, "accuracy": zeros, "seconds": zeros},
                                bytes_sent=[{} for _ in range(job.epochs)])
    return program


#: the defenses the active party is measured against, by name (each built fresh for its run)
DEFENSES = {
    "none": lambda: NoDefense(),
    "noise_embedding": lambda: GaussianEmbeddingNoise(scale=1.0, seed=0),
    "fedpass": lambda: FedPass(seed=0),
    "noise_gradient": lambda: GaussianGradientNoise(scale=1.0, seed=0),
    "sparsify": lambda: GradientSparsification(keep_fraction=0.25),
    "dp_sgd": lambda: DPSGD(epsilon=1.0, clip_norm=1.0, seed=0),
    "vfl_afe": lambda: VFLAFE(t=1.0, epsilon=1.0, rescale=False, adjust=False, seed=0),
    "vfl_afe_full": lambda: VFLAFE(t=1.0, epsilon=1.0, seed=0),  # +R and +D
    "vfl_afe_clip_only": lambda: VFLAFE(t=1.0, epsilon=1e4, rescale=False, adjust=False, seed=0),
}


@functools.lru_cache(maxsize=None)
def _attack(defense: str, attacker: str) -> Tuple[Reading, Any]:
    """Train with the defense named ``defense`` and the active party ``attacker``: what it reads, and the
    passive party's ``privacy_spent_`` (a run is deterministic, so each one runs once per session)."""
    seen: Dict[int, list] = {}
    program = {"observe": _observing, "hijack": _hijacking}[attacker](seen)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(trainer.PROGRAMS, "active", program)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a PrivacyWarning where a defense's delta is at least 1/n
            model = SplitNNClassifier(bottoms=lambda p: mlp_bottom(p, (32,), 12), defense=DEFENSES[defense](),
                                      epochs=EPOCHS, batch_size=BATCH, lr=LR, seed=0, device="cpu").fit([PASSIVE],
                                                                                                        LABELS)
    return _read(seen), model.privacy_spent_["passive_0"]


def _dp_bound(spent) -> float:
    """The best accuracy at telling two candidate rows apart that (epsilon, delta)-DP allows."""
    tail = math.exp(-spent.epsilon)  # (e^eps + delta) / (1 + e^eps), written not to overflow
    return (1.0 + spent.delta * tail) / (1.0 + tail)


@pytest.mark.parametrize("defense", ["none", "noise_embedding", "fedpass"])
def test_a_hijacking_active_party_reads_the_passive_columns_through_a_defense_without_a_guarantee(defense):
    """Measured (30 epochs; observe -> hijack, feature error relative to the column-mean guess): none 0.076 ->
    0.014, noise_embedding (scale 1) 0.31 -> 0.052, fedpass 0.089 -> 0.027; a target told from another row
    1.00 of the time when hijacked (observing through the noise: 0.91)."""
    honest, _ = _attack(defense, "observe")
    hijacked, _ = _attack(defense, "hijack")
    assert hijacked.nmse < 0.5 * honest.nmse  # the deviation at least halves the error of the honest reading
    assert hijacked.pair_accuracy > 0.99


@pytest.mark.parametrize("defense", ["noise_gradient", "sparsify"])
def test_a_defense_the_active_party_applies_is_one_a_deviating_active_party_skips(defense):
    """Gradient noise and sparsification protect the labels from the passive party and run at the active
    party: a hijacker leaves them out, and the passive party's bottom trains exactly as with no defense."""
    assert _attack(defense, "hijack")[0] == _attack("none", "hijack")[0]


def test_dp_sgd_bounds_the_bottom_weights_not_the_embeddings_an_active_party_reads():
    """DP-SGD at epsilon 1 (C = 1): the embeddings are sent as computed, so whether the active party follows
    the protocol or hijacks, it tells a target's columns from another row's far beyond what epsilon 1 would
    allow a DP release (0.73): measured 1.00 both ways, feature error 0.070 observing, 0.066 hijacking (the
    clipped, noised updates slow the hijack down; they bound nothing it reads)."""
    honest, spent = _attack("dp_sgd", "observe")
    hijacked, _ = _attack("dp_sgd", "hijack")
    bound = _dp_bound(spent)
    assert spent.epsilon <= 1.0 and bound < 0.75
    assert honest.pair_accuracy > bound + 0.2 and hijacked.pair_accuracy > bound + 0.2
    assert honest.nmse < 0.25 and hijacked.nmse < 0.25  # a quarter of the column-mean guess's error at most


@pytest.mark.parametrize("defense", ["vfl_afe", "vfl_afe_full"])
def test_vfl_afe_bounds_a_hijacking_active_party_by_its_epsilon(defense):
    """VFL-AFE at epsilon 1 for the whole run (t = 1): the hijacker tells a target's columns from another
    row's no better than epsilon 1 allows; with the noise made negligible (epsilon 10^4, the clip alone)
    the same hijack does (0.99, feature error 0.10), so the bound holds because of the noise. Measured:
    0.52 (bound 0.73), feature error 1.02 (the column-mean guess: 1). The full variant's (+R, +D) KL and
    contrastive terms also train the bottom on the targets (its weights, which the guarantee does not
    cover): measured the same, 0.52."""
    hijacked, spent = _attack(defense, "hijack")
    assert spent.epsilon <= 1.0
    bound = _dp_bound(spent)
    slack = 3.0 * math.sqrt(bound * (1.0 - bound) / len(TARGETS))  # three standard errors of the measured rate
    assert hijacked.pair_accuracy <= bound + slack
    assert hijacked.nmse > 0.9  # within a tenth of the column-mean guess's error
    assert _attack("vfl_afe_clip_only", "hijack")[0].pair_accuracy > bound + slack  # without the noise: broken


def test_dp_sgd_sensitivity_holds_only_while_each_returned_gradient_reads_its_own_row(monkeypatch):
    """DP-SGD calibrates its noise to a replaced row moving the sampled sum of clipped per-row gradients by
    at most 2C: each row's gradient must depend on that row alone. An active party that returns, for every
    row, a gradient read off one row's embedding makes every clipped term move when that row is replaced:
    measured 36.6 (18 times the 2C the epsilon assumes; batch of 32, C = 1, at most 2 B C = 64), against
    1.06 for the honest gradients; the passive party cannot tell."""
    from vflsec.dp.mechanisms import SubsampledGaussianMechanism

    sums = []

    def noiseless(self, value, *, clip, generator=None):
        sums.append(value.detach().to(torch.float64).clone())
        return value

    monkeypatch.setattr(SubsampledGaussianMechanism, "release", noiseless)
    clip = 1.0
    torch.manual_seed(4)
    bottom = mlp_bottom(10, (16,), 8)
    head = torch.nn.Linear(8, 2)
    batch = BatchInfo(epoch=0, step=0, global_step=0, indices=np.arange(32, dtype=np.int64))
    x = torch.from_numpy(PASSIVE[:32].copy())
    neighbour = x.clone()
    neighbour[0] = torch.from_numpy(PASSIVE[100])  # row 0 replaced

    def honest(h):
        out = h.detach().requires_grad_(True)
        torch.nn.functional.cross_entropy(head(out), torch.from_numpy(LABELS[:32])).backward()
        return out.grad

    def hijacking(h):
        return 10.0 * h.detach()[0].expand_as(h).contiguous()  # every row's gradient: row 0's embedding

    def clipped_sum(rows, gradient):
        dp = DPSGD(epsilon=1.0, clip_norm=clip, seed=0)
        dp.setup(DefenseContext(n_classes=2, passive_parties=("p",), n_samples=len(LABELS), batch_size=32,
                                epochs=1))
        model = copy.deepcopy(bottom)
        dp.bottom_backward("p", model, torch.optim.SGD(model.parameters(), lr=0.0), rows, model,
                           gradient(model(rows)), batch)
        return sums[-1]

    moved = {name: float(torch.linalg.vector_norm(clipped_sum(x, g) - clipped_sum(neighbour, g)))
             for name, g in (("honest", honest), ("hijacking", hijacking))}
    assert moved["honest"] <= 2 * clip * (1 + 1e-6)
    assert moved["hijacking"] > 5 * 2 * clip
    print(f"a replaced row moves the clipped sum by {moved['honest']:.3f} (honest), {moved['hijacking']:.3f} "
          f"(hijacking); the noise assumes at most {2 * clip}")


# -- a passive party reading the labels -----------------------------------------------------------------

KNOWN_LABELS = np.sort(np.random.default_rng(3).choice(len(LABELS), 40, replace=False))


def _reading_passive(received: list, *, constant: bool):
    """The passive party's own program, recording each batch's gradients; ``constant``: it sends zeros."""
    def program(endpoint, job, data):
        schedule = iter(list(trainer._batches(job)))
        send, recv = endpoint.send, endpoint.recv
        current = {}

        def sending(receiver, tag, payload):
            if tag == TAG_EMBEDDING:
                current["batch"] = next(schedule)
                if constant:
                    payload = np.zeros_like(payload)
            return send(receiver, tag, payload)

        def receiving(sender, tag, *args, **kwargs):
            payload = recv(sender, tag, *args, **kwargs)
            if tag == TAG_GRADIENT:
                received.append((current["batch"].indices, np.asarray(payload, dtype=np.float64)))
            return payload

        endpoint.send, endpoint.recv = sending, receiving
        return trainer.passive_program(endpoint, job, data)
    return program


def _labels_read(defense, monkeypatch, *, constant: bool) -> float:
    """The share of the unknown rows whose label the passive party reads right."""
    received: list = []
    with monkeypatch.context() as patch:
        patch.setitem(trainer.PROGRAMS, "passive", _reading_passive(received, constant=constant))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            SplitNNClassifier(bottoms=lambda p: mlp_bottom(p, (32,), 12), defense=copy.deepcopy(defense), epochs=10,
                              batch_size=64, lr=0.01, seed=0, device="cpu").fit([PASSIVE], LABELS)
    known = np.full(len(LABELS), -1)
    known[KNOWN_LABELS] = LABELS[KNOWN_LABELS]
    score = np.zeros(len(LABELS))
    for rows, g in received:
        mine = known[rows] >= 0
        unit = g / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-300)
        score[rows] += unit @ (unit[mine].T @ (2.0 * known[rows][mine] - 1.0))
    unknown = np.setdiff1d(np.arange(len(LABELS)), KNOWN_LABELS)
    return float(np.mean((score[unknown] > 0) == (LABELS[unknown] == 1)))


@pytest.mark.parametrize("defense", [NoDefense(), GradientSparsification(keep_fraction=0.25), FedPass(seed=0)],
                         ids=["none", "sparsify", "fedpass"])
def test_a_passive_party_reads_every_label_from_its_gradients_where_the_defense_adds_no_noise(defense, monkeypatch):
    """With the default linear head and no columns at the active party, a row's gradient is a multiple of
    one vector (per batch) whose sign is its label: 40 known labels give every other one, following the
    protocol (measured 1.00 under none, sparsify (a quarter of each row's coordinates kept) and FedPass's
    passports); deviating adds nothing, and the majority rate (0.63) is far below."""
    majority = max(np.mean(LABELS), 1.0 - np.mean(LABELS))
    honest = _labels_read(defense, monkeypatch, constant=False)
    assert honest > majority + 0.3
    assert _labels_read(defense, monkeypatch, constant=True) >= honest - 0.01


def test_a_passive_party_sending_one_embedding_for_every_row_reads_more_labels_through_gradient_noise(monkeypatch):
    """Gradient noise of scale 0.01 (about 25 times the honest gradients' mean magnitude): following the
    protocol the passive party reads 0.53 of the labels (the majority rate: 0.63); sending zeros for every
    row it makes every gradient as large as an unsure prediction gives (3 times the honest magnitude) and
    reads 0.68. The noise
    is drawn by the active party; nothing bounds the gain (no guarantee is claimed), and nothing detects it."""
    defense = GaussianGradientNoise(scale=0.01, seed=0)
    honest = _labels_read(defense, monkeypatch, constant=False)
    deviating = _labels_read(defense, monkeypatch, constant=True)
    assert deviating > honest + 0.05
