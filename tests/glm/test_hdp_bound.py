"""HDP-VFL's learning-rate limit and sensitivities against worst-case neighbours.

The sensitivities of Lemma 3/4 bound the L2 distance between the IR
sequences that the noise-free recursion of the coupled parties releases on
two neighbouring datasets (derivation in ``vflsec.dp.sensitivity``). These
tests build neighbouring pairs designed to push that distance up (all rows
equal, so the joint curvature is the largest possible; balanced labels, so
theta stays near 0 where the logistic curvature peaks; the changed row
flipped), run the *real* "hdp" party programs with the noise off, and
compare the observed distance with the sensitivity at the largest lr the
code accepts. The paper's per-party limit (lr <= 7.97) is shown to break the
bound on the same construction.
"""
import math

import numpy as np
import pytest

from vflsec.dp import hdp_max_lr, hdp_sensitivities, loss_constants
from vflsec.glm import GLMJob, PartyData, register_protocol, run_job
from vflsec.glm.hdp import hdp_active, hdp_passive

LOGISTIC = loss_constants("logistic")


class _RecordingEndpoint:
    """Forwards everything to the real endpoint and keeps a copy of every
    payload it sends (the party's released IRs)."""

    def __init__(self, endpoint):
        self._endpoint = endpoint
        self.sent = []

    def send(self, peer, tag, payload):
        self.sent.append((peer, tag, np.array(payload, copy=True)))
        return self._endpoint.send(peer, tag, payload)

    def __getattr__(self, name):
        return getattr(self._endpoint, name)


_RELEASES = {}


def _recording(program):
    def run(endpoint, job, data):
        rec = _RecordingEndpoint(endpoint)
        result = program(rec, job, data)
        _RELEASES[endpoint.name] = rec.sent
        return result

    return run


register_protocol("_hdp_recording", {"active": _recording(hdp_active), "passive": _recording(hdp_passive)},
                  replace=True)


def _released_irs(parts, y, *, lr, epochs, batch_size, k, lam=0.0):
    """Released IR sequences of the real hdp programs (noise off): active's
    IR_A (the copy sent to the first passive) and each passive's IR_B."""
    n = len(y)
    passives = tuple(f"p{i}" for i in range(1, len(parts)))
    job = GLMJob("_hdp_recording", n_samples=n, lr=lr, epochs=epochs, batch_size=batch_size, k=k, lam=lam,
                 passives=passives, noise=False)
    data = {"active": PartyData(parts[0], y)}
    data.update({name: PartyData(X) for name, X in zip(passives, parts[1:])})
    _RELEASES.clear()
    run_job(job, data, timeout=120)
    ir_a = np.concatenate([p for peer, _, p in _RELEASES["active"] if peer == passives[0]])
    ir_b = {name: np.concatenate([p for _, _, p in _RELEASES[name]]) for name in passives}
    return ir_a, ir_b


def _mirror_irs(parts, y, *, lr, epochs, batch_size, k, lam=0.0):
    """The same noise-free coupled recursion in plain numpy (fast, for the
    randomized search); checked equal to the real programs below."""
    n = len(y)
    job = GLMJob("plain", n_samples=n, lr=lr, epochs=epochs, batch_size=batch_size, k=k, lam=lam,
                 passives=tuple(f"p{i}" for i in range(1, len(parts))))
    w = [np.zeros(X.shape[1]) for X in parts]
    ir_a, ir_b = [], [[] for _ in parts[1:]]
    for _, _, idx in job.batches():
        partial = [X[idx] @ wp for X, wp in zip(parts, w)]
        theta = partial[0] + sum(partial[1:])
        h = -y[idx] / (1.0 + np.exp(y[idx] * theta))
        ir_a.append(h)
        for i, ir in enumerate(partial[1:]):
            ir_b[i].append(ir)
        for i, X in enumerate(parts):
            wp = w[i] - lr * (h @ X[idx] / batch_size + lam * w[i])
            w[i] = wp / max(1.0, np.linalg.norm(wp) / k)
    return np.concatenate(ir_a), [np.concatenate(seq) for seq in ir_b]


def _aligned_pair(n, n_parties, kind):
    """Every row identical with unit-norm blocks, labels alternating; the
    neighbour flips row 0's active block and label ("active") or the first
    passive block of row 0 ("passive")."""
    parts = [np.ones((n, 1)) for _ in range(n_parties)]
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    parts2, y2 = [X.copy() for X in parts], y.copy()
    if kind == "active":
        parts2[0][0] = -1.0
        y2[0] = -y2[0]
    else:
        parts2[1][0] = -1.0
    return (parts, y), (parts2, y2)


def _sensitivity(kind, *, lr, epochs, n, batch_size, k, n_parties, lam=0.0):
    sens = hdp_sensitivities(loss="logistic", lr=lr, epochs=epochs, steps=epochs * math.ceil(n / batch_size),
                             batch_size=batch_size, k=k, n_parties=n_parties, lam=lam)
    return sens.active if kind == "active" else sens.passive


def _paper_sensitivity(kind, *, lr, epochs, n, batch_size, k):
    """Lemma 3/4 as published (one party's row norm, no coupling)."""
    e, T, b, c = epochs, epochs * math.ceil(n / batch_size), batch_size, LOGISTIC
    if kind == "passive":
        return math.sqrt(4 * e**2 * T * lr**2 / b + 8 * k * e**2 * lr / b + 4 * k**2 * e)
    jump = c.beta_theta * k + c.beta_y * c.k_y
    return math.sqrt(4 * c.beta_theta**2 * e**2 * T * lr**2 / b + 8 * jump * c.beta_theta * e**2 * lr / b
                     + 4 * jump**2 * e)


def _distance(kind, irs1, irs2):
    if kind == "active":
        return float(np.linalg.norm(irs1[0] - irs2[0]))
    return float(np.linalg.norm(irs1[1][0] - irs2[1][0]))


def test_max_lr_is_the_coupled_non_expansive_limit():
    assert hdp_max_lr(LOGISTIC, n_parties=2) == pytest.approx(2 / 0.5)
    assert hdp_max_lr(LOGISTIC, n_parties=3, penalty="l2", lam=0.01) == pytest.approx(2 / (0.75 + 0.01))
    assert hdp_max_lr(LOGISTIC, n_parties=2, penalty="l1", lam=0.5) == pytest.approx(4.0)  # prox: no lam
    with pytest.raises(ValueError, match="n_parties"):
        hdp_max_lr(LOGISTIC, n_parties=1)
    with pytest.raises(ValueError, match="penalty"):
        hdp_max_lr(LOGISTIC, n_parties=2, penalty="ridge")


@pytest.mark.parametrize("n_parties, lam", [(2, 0.0), (2, 0.001), (3, 0.001)])
def test_lr_above_the_limit_is_refused_by_the_bounds_and_the_protocol(n_parties, lam):
    limit = hdp_max_lr(LOGISTIC, n_parties=n_parties, lam=lam)
    common = dict(loss="logistic", epochs=1, steps=1, batch_size=4, k=1.0, n_parties=n_parties, lam=lam)
    hdp_sensitivities(lr=limit, **common)  # the limit itself is accepted
    with pytest.raises(ValueError, match=r"exceeds 2 / \(n_parties \* beta_theta"):
        hdp_sensitivities(lr=limit * (1 + 1e-9), **common)
    # The paper's per-party limit 2 / (beta_theta + lam) ~ 7.97 is no longer accepted.
    passives = tuple(f"p{i}" for i in range(1, n_parties))
    job = GLMJob("hdp", n_samples=8, lr=2 / (0.25 + lam) * 0.99, batch_size=4, lam=lam, passives=passives)
    data = {"active": PartyData(np.eye(8, 2) * 0.5, np.where(np.arange(8) % 2, 1.0, -1.0))}
    data.update({p: PartyData(np.eye(8, 2) * 0.5) for p in passives})
    with pytest.raises(ValueError, match="not non-expansive"):
        run_job(job, data, timeout=60)


def test_mirror_is_the_protocol_recursion():
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=(24, d)) for d in (2, 3, 1)]
    parts = [X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None] for X in parts]
    y = rng.choice([-1.0, 1.0], size=24)
    kw = dict(lr=hdp_max_lr(LOGISTIC, n_parties=3), epochs=3, batch_size=10, k=0.7)
    ir_a, ir_b = _released_irs(parts, y, **kw)
    m_a, m_b = _mirror_irs(parts, y, **kw)
    np.testing.assert_allclose(ir_a, m_a, rtol=1e-12, atol=1e-14)
    for name, seq in zip(sorted(ir_b), m_b):
        np.testing.assert_allclose(ir_b[name], seq, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["active", "passive"])
def test_paper_per_party_limit_breaks_the_paper_bound(kind):
    """The bug this module's limit fixes: at lr = 7.9 (accepted before, below
    2 / (beta_theta + lam)) two coupled parties expand distances and the IR
    sequences of neighbouring datasets end up further apart than Lemma 3/4."""
    n = 400
    (p1, y1), (p2, y2) = _aligned_pair(n, 2, kind)
    kw = dict(lr=7.9, epochs=20, batch_size=n, k=1.0)
    observed = _distance(kind, _mirror_irs(p1, y1, **kw), _mirror_irs(p2, y2, **kw))
    assert observed > 1.05 * _paper_sensitivity(kind, lr=7.9, epochs=20, n=n, batch_size=n, k=1.0)


@pytest.mark.parametrize("n_parties", [2, 3])
@pytest.mark.parametrize("kind", ["active", "passive"])
def test_worst_case_construction_stays_within_sensitivity_at_the_largest_accepted_lr(kind, n_parties):
    n, lam = 400, 0.001
    lr = hdp_max_lr(LOGISTIC, n_parties=n_parties, lam=lam)
    (p1, y1), (p2, y2) = _aligned_pair(n, n_parties, kind)
    for k, epochs, b in [(1.0, 20, n), (5.0, 5, 50)]:
        kw = dict(lr=lr, epochs=epochs, batch_size=b, k=k, lam=lam)
        irs1 = _released_irs(p1, y1, **kw)
        irs2 = _released_irs(p2, y2, **kw)
        observed = _distance(kind, (irs1[0], [irs1[1]["p1"]]), (irs2[0], [irs2[1]["p1"]]))
        bound = _sensitivity(kind, lr=lr, epochs=epochs, n=n, batch_size=b, k=k, n_parties=n_parties, lam=lam)
        assert 0 < observed <= bound, (k, epochs, b, observed, bound)


def test_randomized_adversarial_search_never_exceeds_the_sensitivity():
    """A seeded search over small instances (random unit-norm blocks, half of
    them with all rows aligned; random neighbour of either kind) at the
    largest accepted lr: the observed distance stays below the bound. (The
    largest ratio seen while designing this test was ~0.4.)"""
    rng = np.random.default_rng(20261123)

    def unit(rows, d):
        x = rng.normal(size=(rows, d))
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    worst = 0.0
    for _ in range(300):
        n_parties = int(rng.choice([2, 3]))
        n = int(rng.choice([4, 8, 16, 32]))
        b = int(rng.choice([n, max(1, n // 2), max(1, n // 4)]))
        epochs, k = int(rng.integers(1, 6)), float(rng.choice([0.5, 1.0, 2.0, 5.0]))
        parts = [unit(n, int(rng.integers(1, 3))) for _ in range(n_parties)]
        if rng.random() < 0.5:
            parts = [np.repeat(X[:1], n, axis=0) for X in parts]
        y = rng.choice([-1.0, 1.0], size=n)
        kind = "active" if rng.random() < 0.5 else "passive"
        parts2, y2, i = [X.copy() for X in parts], y.copy(), int(rng.integers(n))
        block = 0 if kind == "active" else 1
        parts2[block][i] = -parts[block][i] if rng.random() < 0.5 else unit(1, parts[block].shape[1])[0]
        if kind == "active" and rng.random() < 0.7:
            y2[i] = -y[i]
        lr = hdp_max_lr(LOGISTIC, n_parties=n_parties)
        kw = dict(lr=lr, epochs=epochs, batch_size=b, k=k)
        observed = _distance(kind, _mirror_irs(parts, y, **kw), _mirror_irs(parts2, y2, **kw))
        bound = _sensitivity(kind, lr=lr, epochs=epochs, n=n, batch_size=b, k=k, n_parties=n_parties)
        worst = max(worst, observed / bound)
    assert 0.05 < worst <= 1.0


def test_passive_party_clips_the_noisy_ir_it_receives(monkeypatch):
    """Adaptive-composition condition (module docstring, step 5): a huge
    noise draw on IR_A must not move the passive weights by more than the
    noise-free IR could."""
    from vflsec.glm import ir_exchange

    seen = []
    real = ir_exchange.penalized_step

    def spy(penalty, w, g, lr, lam, mu=1.0):
        seen.append(np.abs(g).max())
        return real(penalty, w, g, lr, lam, mu)

    monkeypatch.setattr(ir_exchange, "penalized_step", spy)
    X = np.full((8, 1), 1.0)
    y = np.where(np.arange(8) % 2, 1.0, -1.0)
    job = GLMJob("hdp", n_samples=8, lr=1.0, batch_size=8, epochs=2, epsilon=1e-6, noise_seed=3)
    run_job(job, {"active": PartyData(X, y), "passive": PartyData(X)}, timeout=60)
    # |g| = |sum_j clip(Sec[IR_A]_j) x_j| / b <= L max|x| = 1 on both parties.
    assert max(seen) <= 1.0 + 1e-12


def test_active_ir_is_clipped_to_the_lipschitz_bound_the_lemmas_assume():
    """For the L2-loss SVM |h| = 2 max(0, 1 - y theta) reaches 2 (1 + P k) > L = 2
    once the weights grow; the released IR_A must stay within [-L, L]."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(64, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(X[:, 0] > 0, -1.0, 1.0)  # start far on the wrong side: large hinge residuals
    job = GLMJob("_hdp_recording", n_samples=64, loss="svm", lr=0.4, epochs=3, batch_size=16, k=5.0, noise=False)
    _RELEASES.clear()
    run_job(job, {"active": PartyData(X, y), "passive": PartyData(-X)}, timeout=60)
    ir_a = np.concatenate([p for _, _, p in _RELEASES["active"]])
    assert np.max(np.abs(ir_a)) <= loss_constants("svm").L
    assert np.max(np.abs(ir_a)) == pytest.approx(2.0)  # the clip binds in this construction
