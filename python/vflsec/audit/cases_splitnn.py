"""Audits of the split-learning defenses: VFL-AFE in each variant, DP-SGD, and the
noise baselines -- each through the defense's own release code.

VFL-AFE. One batch of 8 rows of width 4 as the passive party's bottom model
outputs them, released by ``VFLAFE.transform_embedding`` (clip, +R rescale,
lattice release). The pair replaces row 0: ``+t e1`` in world 0, ``-t e1`` in
world 1 (opposite points of the clip sphere: distance 2t, the stated
sensitivity). Without +R and for the paper's rule the other seven rows sit
together at ``0.5 t e1``, so the batch's pairwise distances -- and with them
the paper's rescale factor -- differ as much as one row can make them; for
+R with the DP factor they sit at the origin, so the recentred row still
moves by about 2t (the embedding part's sensitivity) and the centre by its
full 2t/n. Claimed: the defense's ``privacy_spent()`` for one epoch (one
release of the batch).

DP-SGD. A linear bottom model and a batch of 4 samples, one step at sampling
rate 1, through ``DPSGD.bottom_backward``; sample 0's returned gradient
``dL/dh`` is ``+G u`` in world 0 and ``-G u`` in world 1 with G large, the
others' zero, so sample 0's per-sample gradient is clipped to norm C in
opposite directions (distance 2C: a replaced row under the VFL relation). The
released noisy sum is read back from the parameters' ``.grad``. Claimed: the
defense's ``privacy_spent()`` after that step.

Baselines ("noise_embedding", "noise_gradient"): no clipping, so no
sensitivity; the pair is 0 against a shift of 10 noise standard deviations.
They claim no guarantee and the audit shows what that means.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

import numpy as np

from .cases import AuditCase, Claim, Scores, case_seed, register_case, sampled_scores, stack_runs

T, EPSILON, DELTA = 1.0, 5.0, 1e-2
ROWS, WIDTH, PARTY = 8, 4, "passive"

# variant -> (VFLAFE keywords, where the 7 unchanged rows sit, in units of t along e1)
VFL_AFE_VARIANTS: Dict[str, Tuple[Dict[str, Any], float]] = {
    "vanilla": (dict(rescale=False, adjust=False), 0.5),
    "D": (dict(rescale=False, adjust=True), 0.5),
    "R": (dict(rescale=True, adjust=False), 0.0),
    "full": (dict(rescale=True, adjust=True), 0.0),
    # No shrink: the factor is >= 1, so row 0's recentred deviation is clipped to t in both worlds and the
    # release moves by the full 2t (with shrinking, a noisy large diameter estimate can shrink it).
    "R, no shrink": (dict(rescale=True, adjust=False, rescale_shrink=False), 0.0),
    "R, paper's batch factor": (dict(rescale=True, adjust=False, rescale_estimate="batch"), 0.5),
    "R, paper's batch factor, no shrink": (dict(rescale=True, adjust=False, rescale_estimate="batch",
                                                rescale_shrink=False), 0.5),
}


def _torch():
    import torch

    return torch


def _vfl_afe(params: Dict[str, Any], seed: int):
    from ..splitnn.defenses import DefenseContext
    from ..splitnn.defenses.vfl_afe import VFLAFE

    defense = VFLAFE(t=T, epsilon=EPSILON, delta=DELTA, seed=seed, **params)
    defense.setup(DefenseContext(n_classes=2, passive_parties=(PARTY,), n_samples=ROWS, batch_size=ROWS, epochs=1,
                                 extra={"embedding_dims": {PARTY: WIDTH}}))
    return defense


def _vfl_afe_batch(world: int, others: float = 0.5) -> np.ndarray:
    h = np.zeros((ROWS, WIDTH))
    h[1:, 0] = others * T
    h[0, 0] = T if world == 0 else -T
    return h


def _vfl_afe_claim(params: Dict[str, Any]) -> Callable[[], Claim]:
    def claim() -> Claim:
        defense = _vfl_afe(params, 0)
        torch = _torch()
        # Some variants calibrate per batch shape at the first release: make one.
        from ..splitnn.defenses import BatchInfo

        defense.transform_embedding(PARTY, torch.from_numpy(_vfl_afe_batch(0)), BatchInfo(0, 0, 0, np.arange(ROWS)))
        spent = defense.privacy_spent()
        return Claim(spent.epsilon_per_release if spent.epsilon is not None else None, spent.delta,
                     getattr(spent, "neighbours", "add_remove"), "VFLAFE.privacy_spent().epsilon_per_release")
    return claim


def _vfl_afe_runner(params: Dict[str, Any], others: float, exact_direction: bool) -> Callable[[int, int], Scores]:
    def sample(world: int, runs: int, seed: int) -> np.ndarray:
        from ..splitnn.defenses import BatchInfo

        torch = _torch()
        defense = _vfl_afe(params, seed)
        h = torch.from_numpy(_vfl_afe_batch(world, others))
        batch = BatchInfo(0, 0, 0, np.arange(ROWS))
        return stack_runs(lambda _: defense.transform_embedding(PARTY, h, batch).numpy(), runs, None,
                          desc=f"vfl_afe world {world}")

    def run(runs: int, seed: int) -> Scores:
        gap = _vfl_afe_batch(1, others) - _vfl_afe_batch(0, others)
        direction = gap.ravel() if exact_direction else None
        realized = stated_mu = None
        if exact_direction:  # without +R the clean release is the clipped batch itself
            realized = float(np.linalg.norm(gap)) / (2.0 * T)
            stated_mu = float(np.linalg.norm(gap)) / _vfl_afe(params, seed).release_sigma(WIDTH, ROWS)
        return sampled_scores(sample, runs, seed, direction=direction, realized=realized, stated_mu=stated_mu)
    return run


for _variant, (_params, _others) in VFL_AFE_VARIANTS.items():
    _mechanism = "vfl_afe_rescale" if _params["rescale"] else "vfl_afe_embedding"
    register_case(AuditCase(
        name=f"vfl_afe[{_variant}]", mechanism=_mechanism,
        pair=f"a batch of 8 rows (width 4): row 0 at +t e1 or -t e1, the other 7 at {_others:g} t e1 (t = 1)",
        claim=_vfl_afe_claim(_params), run=_vfl_afe_runner(_params, _others, exact_direction=not _params["rescale"]),
        # The strongest +R pair gets the full count in the quick audit too: at 3,000 runs its bound cannot
        # rise above the claim, and the quick self-test must catch half the noise for every mechanism.
        runs_full=20_000, runs_quick=20_000 if _variant == "R, no shrink" else 3_000))


# -- DP-SGD ---------------------------------------------------------------------------------
SGD_EPSILON, SGD_DELTA, SGD_CLIP, SGD_BATCH, SGD_IN, SGD_OUT = 2.0, 1e-3, 1.0, 4, 3, 2


def _dp_sgd_setup(seed: int):
    torch = _torch()
    from ..splitnn.defenses import DefenseContext
    from ..splitnn.defenses.dp_sgd import DPSGD

    defense = DPSGD(epsilon=SGD_EPSILON, delta=SGD_DELTA, clip_norm=SGD_CLIP, seed=seed)
    defense.setup(DefenseContext(n_classes=2, passive_parties=(PARTY,), n_samples=SGD_BATCH, batch_size=SGD_BATCH,
                                 epochs=1))
    torch.manual_seed(0)
    module = torch.nn.Linear(SGD_IN, SGD_OUT).double()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.0)  # lr 0: every run sees the same model
    return defense, module, optimizer


def _dp_sgd_inputs(world: int) -> Tuple[Any, Any]:
    torch = _torch()
    x = torch.zeros((SGD_BATCH, SGD_IN), dtype=torch.float64)
    x[:, 0] = 1.0
    grad = torch.zeros((SGD_BATCH, SGD_OUT), dtype=torch.float64)
    grad[0, 0] = 1e3 if world == 0 else -1e3
    return x, grad


def _dp_sgd_step(seed: int, world: int):
    """One real DP-SGD step; the released sum as a flat vector."""
    from ..splitnn.defenses import BatchInfo

    defense, module, optimizer = _dp_sgd_setup(seed)
    x, grad = _dp_sgd_inputs(world)
    defense.bottom_backward(PARTY, module, optimizer, x, module, grad, BatchInfo(0, 0, 0, np.arange(SGD_BATCH)))
    flat = np.concatenate([p.grad.detach().numpy().ravel() for p in module.parameters()])
    return flat * SGD_BATCH, defense


def _dp_sgd_claim() -> Claim:
    _, defense = _dp_sgd_step(0, 0)
    spent = defense.privacy_spent()
    return Claim(spent.epsilon, spent.delta, getattr(spent, "neighbours", "add_remove"),
                 "DPSGD.privacy_spent() after its one planned step")


def _dp_sgd_run(runs: int, seed: int) -> Scores:
    def sample(world: int, n: int, stream: int) -> np.ndarray:
        counter = iter(range(n))
        return stack_runs(lambda _: _dp_sgd_step(case_seed(stream, next(counter)), world)[0], n, None,
                          desc=f"dp_sgd world {world}")

    # The clean per-sample gradient of sample 0 points along W[0, 0] and b[0]; clipped to C in both worlds.
    direction = np.zeros(SGD_IN * SGD_OUT + SGD_OUT)
    direction[0] = 1.0                    # W[0, 0] (x[0, 0] = 1)
    direction[SGD_IN * SGD_OUT] = 1.0     # b[0]
    direction *= -1.0                     # world 1 has the negative gradient
    # The released sum is a fixed 2C apart in the two worlds (sample 0 clipped to C either way).
    sigma = _dp_sgd_step(0, 0)[1].mechanisms_[PARTY].sigma(SGD_CLIP)
    return sampled_scores(sample, runs, seed, direction=direction,
                          notes={"clean distance": f"2C = {2 * SGD_CLIP:g}"}, stated_mu=2.0 * SGD_CLIP / sigma)


register_case(AuditCase(
    name="dp_sgd[one step, q = 1]", mechanism="dp_sgd",
    pair="4 samples, linear bottom; sample 0's returned gradient +G u or -G u (clipped to norm C = 1 in opposite "
         "directions: a replaced row), the others 0",
    claim=_dp_sgd_claim, run=_dp_sgd_run, runs_full=20_000, runs_quick=2_000))


# -- the noise baselines ----------------------------------------------------------------------
NOISE_SCALE, NOISE_SHIFT = 1.0, 10.0


def _noise_claim(kind: str) -> Callable[[], Claim]:
    def claim() -> Claim:
        from ..splitnn.defenses.baselines import GaussianEmbeddingNoise, GaussianGradientNoise

        cls = GaussianEmbeddingNoise if kind == "embedding" else GaussianGradientNoise
        spent = cls(scale=NOISE_SCALE).privacy_spent()
        return Claim(None if spent is None else spent.epsilon, DELTA, "replace_one",
                     f"Gaussian{kind.capitalize()}Noise.privacy_spent() (None: no guarantee)")
    return claim


def _noise_runner(kind: str) -> Callable[[int, int], Scores]:
    def sample(world: int, runs: int, seed: int) -> np.ndarray:
        torch = _torch()
        from ..splitnn.defenses import BatchInfo
        from ..splitnn.defenses.baselines import GaussianEmbeddingNoise, GaussianGradientNoise

        x = torch.zeros((runs, WIDTH), dtype=torch.float64)
        x[:, 0] = NOISE_SHIFT * NOISE_SCALE * world
        batch = BatchInfo(0, 0, 0, np.arange(runs))
        if kind == "embedding":
            return GaussianEmbeddingNoise(scale=NOISE_SCALE, seed=seed).transform_embedding(PARTY, x, batch).numpy()
        return GaussianGradientNoise(scale=NOISE_SCALE, seed=seed).transform_gradient({PARTY: x}, batch)[PARTY].numpy()

    def run(runs: int, seed: int) -> Scores:
        direction = np.zeros(WIDTH)
        direction[0] = 1.0
        return sampled_scores(sample, runs, seed, direction=direction)
    return run


for _kind in ("embedding", "gradient"):
    register_case(AuditCase(
        name=f"noise_{_kind}", mechanism=f"noise_{_kind}",
        pair=f"one row of width 4: 0 or shifted by {NOISE_SHIFT:g} noise standard deviations (no clip bounds it)",
        claim=_noise_claim(_kind), run=_noise_runner(_kind), runs_full=20_000, runs_quick=2_000))

