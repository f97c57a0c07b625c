"""Label inference attacks against a tiny two-party split model.

The local driver below plays both parties and records only what the passive
party receives (per-batch gradients dL/dh for the embedding rows it sent);
the attacks get nothing else, except model completion's 40 auxiliary labels.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vflsec.attacks import (  # noqa: E402
    choose_auxiliary,
    direct_label_inference,
    direction_scoring,
    label_attack_accuracy,
    model_completion,
    norm_scoring,
)
from vflsec.attacks.metrics import membership_scores  # noqa: E402

torch.set_num_threads(1)


def bottom_mlp(d_in, d_out, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(d_in, 16), torch.nn.ReLU(), torch.nn.Linear(16, d_out))


def train_split(X_passive, X_active, y, n_out, *, softmax_head, grad_noise=0.0, epochs=5, batch=32, seed=0):
    """Split training; returns the passive bottom model and the passive
    party's view: a list of (batch rows, gradient received) per step.

    softmax_head: the passive party's output is its share of the logits and
    the active head is a plain softmax of (passive + active logits).
    Otherwise the active party concatenates and applies a linear head."""
    rng = np.random.default_rng(seed)
    bottom_p = bottom_mlp(X_passive.shape[1], n_out, seed)
    bottom_a = bottom_mlp(X_active.shape[1], n_out, seed + 1)
    head = None if softmax_head else torch.nn.Linear(2 * n_out, int(y.max()) + 1)
    params_a = list(bottom_a.parameters()) + ([] if head is None else list(head.parameters()))
    opt_p = torch.optim.SGD(bottom_p.parameters(), lr=0.1)
    opt_a = torch.optim.SGD(params_a, lr=0.1)
    xp, xa, yt = (torch.as_tensor(X_passive, dtype=torch.float32), torch.as_tensor(X_active, dtype=torch.float32),
                  torch.as_tensor(y, dtype=torch.int64))
    gen = torch.Generator().manual_seed(seed)
    view = []
    for _ in range(epochs):
        order = rng.permutation(len(y))
        for start in range(0, len(y), batch):
            idx = order[start:start + batch]
            h = bottom_p(xp[idx])
            h_recv = h.detach().requires_grad_(True)  # the message the active party receives
            own = bottom_a(xa[idx])
            logits = h_recv + own if head is None else head(torch.cat([h_recv, own], dim=1))
            opt_a.zero_grad()
            loss = torch.nn.functional.cross_entropy(logits, yt[idx])
            loss.backward()
            g = h_recv.grad
            if grad_noise:
                g = g + grad_noise * torch.randn(g.shape, generator=gen)
            opt_a.step()
            view.append((idx, g.numpy().copy()))  # the message the passive party receives
            opt_p.zero_grad()
            (h * g).sum().backward()
            opt_p.step()
    return bottom_p, view


def make_data(n=400, seed=0, positive_rate=0.5, xor=False):
    rng = np.random.default_rng(seed)
    Xp = rng.normal(size=(n, 4))
    Xa = rng.normal(size=(n, 3))
    if xor:
        y = (Xp[:, 0] * Xp[:, 1] > 0).astype(np.int64)
    else:
        score = Xp[:, 0] + Xa[:, 0]
        y = (score > np.quantile(score, 1 - positive_rate)).astype(np.int64)
    return Xp.astype(np.float32), Xa.astype(np.float32), y


def last_epoch(view, n):
    """Gradients of the last epoch, one row per sample (rows and grads)."""
    per_epoch = -(-n // 32)
    idx = np.concatenate([i for i, _ in view[-per_epoch:]])
    grads = np.concatenate([g for _, g in view[-per_epoch:]])
    return idx, grads


def test_direct_label_inference_recovers_labels_from_softmax_head():
    rng = np.random.default_rng(1)
    Xp, Xa, _ = make_data()
    y = rng.integers(0, 3, size=Xp.shape[0])  # 3 classes
    _, view = train_split(Xp, Xa, y, 3, softmax_head=True, epochs=1)
    idx, grads = last_epoch(view, len(y))
    acc = label_attack_accuracy(y[idx], direct_label_inference(grads).labels)
    assert acc >= 0.99
    # A strong defense on the returned gradients (noise far above their scale).
    _, noisy = train_split(Xp, Xa, y, 3, softmax_head=True, epochs=1, grad_noise=1.0)
    idx, grads = last_epoch(noisy, len(y))
    assert label_attack_accuracy(y[idx], direct_label_inference(grads).labels) < 0.5


def test_direct_label_inference_binary_sigmoid_signs():
    g = np.array([-0.2, 0.3, -0.01, 0.5])
    assert direct_label_inference(g).labels.tolist() == [1, 0, 1, 0]


def test_norm_and_direction_scoring_on_imbalanced_binary_task():
    Xp, Xa, y = make_data(positive_rate=0.15, seed=2)
    _, view = train_split(Xp, Xa, y, 4, softmax_head=False, epochs=2)
    idx, grads = last_epoch(view, len(y))
    truth = y[idx]
    norm = norm_scoring(grads, positive_rate=0.15)
    assert membership_scores(truth, norm.scores / norm.scores.max())["auc"] > 0.9
    assert label_attack_accuracy(truth, norm.labels) > 0.85
    # Direction scoring works per batch (one model state), with one known positive.
    correct = total = 0
    for rows, g in view[-5:]:
        pos = np.flatnonzero(y[rows] == 1)
        if pos.size == 0:
            continue
        inferred = direction_scoring(g, reference=int(pos[0])).labels
        correct += int(np.sum(inferred == y[rows]))
        total += len(rows)
    assert correct / total > 0.95
    _, noisy = train_split(Xp, Xa, y, 4, softmax_head=False, epochs=1, grad_noise=0.3)
    idx, grads = last_epoch(noisy, len(y))
    scores = norm_scoring(grads).scores
    auc = membership_scores(y[idx], scores / scores.max())["auc"]
    assert auc < 0.7


def test_model_completion_with_40_labels_beats_an_untrained_bottom():
    Xp, Xa, y = make_data(n=600, seed=3, xor=True)
    Xp_train, y_train = Xp[:400], y[:400]
    bottom, _ = train_split(Xp_train, Xa[:400], y_train, 4, softmax_head=False, epochs=25)
    aux = choose_auxiliary(y_train, 40, seed=0)
    assert aux.size == 40 and set(y_train[aux]) == {0, 1}
    trained = model_completion(bottom, Xp_train[aux], y_train[aux], Xp[400:], hidden=(), epochs=300)
    acc_trained = label_attack_accuracy(y[400:], trained.labels)
    # Defense of the strongest kind: the bottom model learned nothing (noise-only gradients).
    noise_bottom, _ = train_split(Xp_train, Xa[:400], y_train, 4, softmax_head=False, epochs=25, grad_noise=5.0)
    noised = model_completion(noise_bottom, Xp_train[aux], y_train[aux], Xp[400:], hidden=(), epochs=300)
    acc_noised = label_attack_accuracy(y[400:], noised.labels)
    assert acc_trained > 0.85
    assert acc_noised < acc_trained - 0.15
    assert trained.scores.shape == (200, 2)


def test_label_attacks_validate_inputs():
    with pytest.raises(ValueError):
        direct_label_inference(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError):
        direction_scoring(np.ones((3, 2)), reference=5)
    with pytest.raises(ValueError):
        direction_scoring(np.zeros((3, 2)), reference=0)
    with pytest.raises(ValueError):
        choose_auxiliary(np.array([0, 1]), 3)
    with pytest.raises(TypeError):
        model_completion("not a model", np.ones((2, 2)), np.array([0, 1]), np.ones((2, 2)))
    with pytest.raises(ValueError):
        norm_scoring(np.ones((4, 2)), positive_rate=1.5)
