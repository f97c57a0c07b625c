"""Protocol "mpc_dp": DP-SGD on the joined features inside secret-sharing MPC (SPU).

The engine skeleton is :mod:`vflsec.glm.mpc`'s (agree, share, train, reveal: the blocks, labels
and weights are secret shares throughout; each party learns its own weight block at the end).
What changes is the training: central DP-SGD (Abadi et al. 2016; the ceiling
:class:`vflsec.glm.CentralDPLogisticRegression`'s ``"dp_sgd"``) run on the secret-shared joined
rows, so the vertical model gets the central guarantee and its subsampling amplification.

Per step ``t`` (``T = ceil(epochs / q)`` steps; ``q`` the Poisson rate ``batch_size / n``
rounded *up* to a multiple of ``2^-12``, the rate the accountant is given):

1. **Secret Poisson sample.** Each party ``p`` draws ``u_p`` uniform on the grid ``{0, ...,
   2^12 - 1} / 2^12`` per row from its noise generator and inputs it as a secret; row ``i`` is
   in the batch iff ``frac(sum_p u_p[i]) < q``, computed by comparisons inside the engine. The
   fractional part of a sum is uniform on the grid when any one party's draw is, so the
   selection is Poisson with rate exactly ``q`` and no party (nor any coalition missing one
   party) learns it.
2. **Bounded per-row gradients.** ``phi'_i = clip(-y_i sigmoid(-y_i theta_i), -1, 1)`` (the
   clamp is exact in fixed point: SPU's sigmoid is an approximation), zero off the sample
   (a select, not a product). Each block's rows are in the unit ball (the design's
   :data:`ROW_BOUND`, checked by each party before sharing), so a row's joined gradient has
   norm at most ``sqrt(P) ROW_BOUND``: no per-row clipping (a secret division) is needed.
3. **Noise on the secret-shared sum.** Every party ``p`` adds its own share of noise ``g K_p``,
   ``K_p`` the lattice sampler's integers at sigma ``sigma = z C`` (``z`` the mechanism's
   multiplier, ``C`` below), inside the engine. The engine's fixed point is set to ``2^-f = g``,
   the lattice spacing :func:`vflsec.kernels.lattice_spacing` gives for sigma, so the sum is on
   the noise's lattice and ``sum + g K_p = g round(sum / g + sigma N)``: post-processing of the
   continuous Gaussian mechanism (the argument of :mod:`vflsec.dp.lattice`). Each party's share
   carries the full sigma, so the noise a party does not know is at least sigma whoever it is,
   and against any coalition of up to ``P - 1`` parties; the total noise is ``P`` shares
   (variance ``P sigma^2``: twice the ceiling's for two parties -- the price of not trusting
   anyone to sample it).
4. **The step** (public constants only): ``v <- mu v + (G + K) / (q n) + lam w``, ``w <- w - lr
   v`` per block, then each party's norm clip ``k`` -- all post-processing of the release.

Sensitivity. Under replace-one a changed row moves the computed sum by at most ``2 C`` with
``C = sqrt(P) ROW_BOUND + 1.5 sqrt(d) 2^-12``: the second term covers the engine's fixed
point (inputs rounded to ``2^-f``, ``f >= 12``: ``sqrt(d) 2^-(f+1)`` per row; one truncation
of the summed products, within one unit ``2^-f`` per coordinate, possibly different in the
two worlds: ``2 sqrt(d) 2^-f``). SPU truncates exactly up to that unit here
(``trunc_allow_msb_error`` off: no probabilistic truncation whose rare failure would be a
data-dependent wrong value). The ``"mpc_dp_sgd"`` mechanism of :data:`vflsec.dp.MECHANISMS`
is calibrated (PLD, replace-one) for ``T`` steps at rate ``q`` on ``d`` coordinates, and
its audit case (``vflsec audit``) runs this module's release function on reconstructed values.

Threat model. The guarantee covers the final model (every block, however revealed) against
every party and every outsider, with semi-honest parties: the engine protocol's own threat model
applies to the data (Cheetah: either party; ABY3: any one of three; semi2k: every party but
the dealer). With semi2k the dealer (the active party) could read the products it dealt for,
the sample's comparisons among them, so the guarantee then does not cover the model against it.
A party that deviates is not covered. Measured (``tests/glm/test_mpc_dp.py``): whatever
one party draws for ``u_p``, the rate stays exactly ``q`` while another party's draw is uniform.
Not prevented, measured: a party that adds no noise share leaves only the others' shares, so
against any other party whose own share is then all the noise the model has no guarantee -- with
two parties the other one subtracts its own share and reads the clipped gradient sum to the fixed
point's error (what that exposes is what the other party did not hold already: the skipper's
columns and, from the active party, the labels; the skipper gains nothing, the share it does not
know is still full sigma); with three, one skipper leaves a full-sigma share
unknown to each other party. And a wrong program or input corrupts the model (no engine protocol
here is maliciously secure). Not prevented, measured (``tests/glm/test_mpc_dp_deviation.py``): the
unit ball is checked by each block's owner before sharing, not inside the engine, so a party that
inputs a row of norm M at a coordinate no other row uses reads that row's clamped slope times M
from its own revealed block; with M = 1e4 sigma it read every targeted label of the active party
(400 of 400; honest rows of norm 1: 0.54, chance). The guarantee holds for parties that input rows
in the unit ball.

Cost: every step touches every row (the sample is secret), so a step costs what a batch of
``n`` rows costs in "mpc"; the steps are ``ceil(1 / q)`` per expected epoch.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from .job import GLMJob, GLMPartyResult, PartyData
from .mpc import EngineTraining, engine_program, job_mpc_protocol
from .registry import register_protocol

__all__ = ["MECHANISM", "MIN_FRACTION_BITS", "PROTOCOL", "SAMPLING_BITS", "TAGS", "MPCDPPlan", "mpc_dp_plan",
           "mpc_dp_privacy_spent", "noisy_gradient_sums", "poisson_selection"]

MECHANISM = "mpc_dp_sgd"
SAMPLING_BITS = 12
"""The sampling draws and the rate are multiples of ``2^-SAMPLING_BITS``."""
MIN_FRACTION_BITS = SAMPLING_BITS  # the draws must be exact in the engine's fixed point
MAX_FRACTION_BITS = 26
_RING_BITS = 62  # a summed product of n rows needs log2(n) + 2 f bits below the 64-bit ring's sign
OPTIONS = ("mpc_protocol", "momentum")


def _row_bound() -> float:
    from ..dp.sensitivity import ROW_NORM_TOLERANCE

    return 1.0 + ROW_NORM_TOLERANCE


@dataclass(frozen=True)
class MPCDPPlan:
    """The public plan of an "mpc_dp" run (module docstring): everything is a function of the job's
    public parameters and the blocks' widths."""

    sampling_rate: float
    steps: int
    steps_per_run: int
    runs: int
    clip: float
    mechanism: Any
    sigma: float
    spacing: float
    fraction_bits: int
    parties: int
    coordinates: int

    def info(self) -> Dict[str, Any]:
        return {"dp_mechanism": MECHANISM, "dp_noise_multiplier": float(self.mechanism.noise_multiplier),
                "dp_sigma_per_party": float(self.sigma), "dp_clip": float(self.clip),
                "dp_sampling_rate": float(self.sampling_rate), "dp_steps": int(self.steps),
                "dp_noise_shares": int(self.parties)}


def sampling_rate(job: GLMJob) -> float:
    """``batch_size / n`` rounded up to a multiple of ``2^-SAMPLING_BITS`` (at most 1)."""
    grid = 2 ** SAMPLING_BITS
    return min(1.0, math.ceil(job.batch_size / job.n_samples * grid - 1e-9) / grid)


def mpc_dp_plan(job: GLMJob, widths: Sequence[int]) -> MPCDPPlan:
    """The plan of ``job`` on blocks of ``widths`` (ValueError where the engine cannot honour it);
    every party and every run asks for it, so it is calibrated once per set of public parameters."""
    return _plan(float(job.epsilon), float(job.delta), int(job.n_samples), sampling_rate(job), int(job.epochs),
                 tuple(int(w) for w in widths))


@functools.lru_cache(maxsize=32)
def _plan(epsilon: float, delta: float, n: int, q: float, epochs: int, widths: Tuple[int, ...]) -> MPCDPPlan:
    from ..dp.mechanisms import SubsampledGaussianMechanism
    from ..kernels import lattice_spacing

    parties, d = len(widths), int(sum(widths))
    steps = max(1, math.ceil(epochs / q - 1e-9))
    per_run = min(steps, max(1, math.ceil(1.0 / q - 1e-9)))
    clip = math.sqrt(parties) * _row_bound() + 1.5 * math.sqrt(d) * 2.0 ** -MIN_FRACTION_BITS
    mechanism = SubsampledGaussianMechanism.calibrated(MECHANISM, epsilon=epsilon, delta=delta,
                                                       sampling_rate=q, steps=steps, coordinates=d,
                                                       neighbours="replace_one")
    sigma = float(mechanism.sigma(clip))
    spacing = float(lattice_spacing(sigma))
    bits = int(round(-math.log2(spacing)))
    top = min(MAX_FRACTION_BITS, int((_RING_BITS - math.log2(max(2, n))) // 2))
    if bits < MIN_FRACTION_BITS:
        raise ValueError(f"protocol 'mpc_dp': epsilon {epsilon:g} needs noise sigma {sigma:.4g}, whose lattice "
                         f"(spacing 2^-{bits}) is coarser than the engine's sampling grid 2^-{MIN_FRACTION_BITS} -- "
                         "raise epsilon, or the batch size")
    if bits > top:
        raise ValueError(f"protocol 'mpc_dp': epsilon {epsilon:g} needs noise sigma {sigma:.4g} only, whose "
                         f"lattice (spacing 2^-{bits}) needs more fraction bits than the 64-bit ring holds for "
                         f"{n} rows (at most {top}) -- lower epsilon, or use protection 'mpc'")
    return MPCDPPlan(q, steps, per_run, math.ceil(steps / per_run), clip, mechanism, sigma, spacing, bits,
                     parties, d)


def mpc_dp_privacy_spent(job: GLMJob) -> Any:
    """The guarantee of an "mpc_dp" job (the same for every party), or None for ``noise=False``."""
    if not job.noise:
        return None
    widths = [job.widths[name] for name in job.parties] if job.widths else None
    if widths is None:
        raise ValueError("protocol 'mpc_dp' needs every party's block width in the job (job.widths)")
    return mpc_dp_plan(job, widths).mechanism.privacy_spent()


# -- the engine's functions (also run in the clear by the audit) ---------------------------------------
def poisson_selection(draws: Sequence[Any], rate: float) -> Any:
    """Row ``i`` is selected iff ``frac(sum_p draws[p][i]) < rate`` (each draw in [0, 1)),
    by comparisons only (no floor of a secret): ``OR_j (j <= v < j + rate)``, ``v`` the sum."""
    import jax.numpy as jnp

    v = draws[0]
    for u in draws[1:]:
        v = v + u
    selected = v < rate
    for j in range(1, len(draws)):
        selected = jnp.logical_or(selected, jnp.logical_and(v >= float(j), v < j + rate))
    return selected


def noisy_gradient_sums(blocks: Sequence[Any], y: Any, weights: Sequence[Any], selected: Any,
                        noise: Sequence[Any]) -> List[Any]:
    """Per block, the released sum ``sum_i [i selected] phi'_i x_i + noise`` (module docstring,
    steps 2 and 3); ``noise[p]`` the block's summed noise shares."""
    import jax
    import jax.numpy as jnp

    theta = blocks[0] @ weights[0]
    for X, w in zip(blocks[1:], weights[1:]):
        theta = theta + X @ w
    slope = jnp.clip(-y * jax.nn.sigmoid(-y * theta), -1.0, 1.0)
    slope = jnp.where(selected, slope, 0.0)
    return [slope @ X + e for X, e in zip(blocks, noise)]


def _run_function(job: GLMJob, plan: MPCDPPlan, widths: Sequence[int], momentum: float) -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp

    parties, lr, lam, k = len(widths), job.lr, job.lam, job.k
    scale = 1.0 / (plan.sampling_rate * job.n_samples)
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(int)

    def run(*args: Any) -> Tuple[Any, ...]:
        P = parties
        blocks, y = args[:P], args[P]
        ws, vs = args[P + 1:2 * P + 1], args[2 * P + 1:3 * P + 1]
        draws, shares, active = args[3 * P + 1:4 * P + 1], args[4 * P + 1:5 * P + 1], args[5 * P + 1]

        def body(s: Any, state: Tuple[Any, ...]) -> Tuple[Any, ...]:
            w_now, v_now = state[:P], state[P:]
            selected = poisson_selection([u[s] for u in draws], plan.sampling_rate)
            total = shares[0][s]
            for K in shares[1:]:
                total = total + K[s]
            noise = [total[offsets[r]:offsets[r + 1]] for r in range(P)]
            sums = noisy_gradient_sums(blocks, y, w_now, selected, noise)
            keep = active[s] > 0.5
            new_w, new_v = [], []
            for w, v, g in zip(w_now, v_now, sums):
                v2 = momentum * v + g * scale + lam * w
                w2 = w - lr * v2
                if k is not None and np.isfinite(k):
                    w2 = w2 / jnp.maximum(1.0, jnp.sqrt(jnp.sum(w2 * w2)) / k)
                new_w.append(jnp.where(keep, w2, w))
                new_v.append(jnp.where(keep, v2, v))
            return tuple(new_w) + tuple(new_v)

        return tuple(jax.lax.fori_loop(0, plan.steps_per_run, body, tuple(ws) + tuple(vs)))

    return run


class MPCDPTraining(EngineTraining):
    """DP-SGD inside the engine (module docstring)."""

    name = "mpc_dp"
    extra_state = ("v",)
    private_inputs = ("u", "K")

    def _plan(self, job: GLMJob) -> MPCDPPlan:
        if not job.widths:
            raise ValueError("protocol 'mpc_dp' needs every party's block width in the job (job.widths)")
        return mpc_dp_plan(job, [job.widths[name] for name in (job.active, *job.passives)])

    def config(self, job: GLMJob, protocol: Any) -> Any:
        from ..mpc.engine import runtime_config

        config = runtime_config(protocol, fraction_bits=self._plan(job).fraction_bits)
        config.trunc_allow_msb_error = False  # exact truncation up to one unit (module docstring)
        return config

    def compile(self, job: GLMJob, widths: Sequence[int]) -> Any:
        from ..mpc.engine import compile_program

        plan, n, P = self._plan(job), job.n_samples, len(widths)
        S, d = plan.steps_per_run, plan.coordinates
        shapes = ([(f"X{r}", (n, width), "float64", True) for r, width in enumerate(widths)]
                  + [("y", (n,), "float64", True)]
                  + [(f"w{r}", (width,), "float64", True) for r, width in enumerate(widths)]
                  + [(f"v{r}", (width,), "float64", True) for r, width in enumerate(widths)]
                  + [(f"u{r}", (S, n), "float64", True) for r in range(P)]
                  + [(f"K{r}", (S, d), "float64", True) for r in range(P)]
                  + [("active", (S,), "float64", False)])
        outputs = self.outputs(P) + [f"v{r}" for r in range(P)]
        return compile_program(_run_function(job, plan, widths, _momentum(job)), shapes, outputs)

    def runs(self, job: GLMJob) -> range:
        return range(self._plan(job).runs)

    def public_inputs(self, job: GLMJob, run: int) -> Dict[str, np.ndarray]:
        plan = self._plan(job)
        first = run * plan.steps_per_run
        active = (first + np.arange(plan.steps_per_run) < plan.steps).astype(np.float64)
        return {"active": active}

    def generator(self, job: GLMJob, party: str) -> Any:
        from .hdp import noise_generator

        return noise_generator(job, party)

    def run_private(self, job: GLMJob, run: int, rank: int, generator: Any) -> Dict[str, np.ndarray]:
        from ..kernels import lattice_gaussian

        plan = self._plan(job)
        S, grid = plan.steps_per_run, 2 ** SAMPLING_BITS
        draws = generator.integers_below(grid, (S, job.n_samples)).astype(np.float64) / grid
        if job.noise:
            noise = lattice_gaussian((S, plan.coordinates), plan.sigma, generator=generator) * plan.spacing
        else:
            noise = np.zeros((S, plan.coordinates))
        return {"u": draws, "K": noise.astype(np.float64)}

    def info(self, job: GLMJob) -> Dict[str, Any]:
        plan = self._plan(job)
        out: Dict[str, Any] = plan.info() if job.noise else {"dp_noise": False}
        if job.noise:
            out["epsilon_spent"] = float(plan.mechanism.privacy_spent().epsilon)
        return out


def _momentum(job: GLMJob) -> float:
    value = job.options.get("momentum", 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) < 1.0:
        raise ValueError(f"protocol 'mpc_dp': momentum must be a number in [0, 1), got {value!r}")
    return float(value)


def _check_job(job: GLMJob) -> None:
    if job.loss != "logistic":
        raise ValueError(f"protocol 'mpc_dp' trains the logistic loss (its per-row gradient is bounded by the rows), "
                         f"not {job.loss!r} -- use loss 'logistic', or protocol 'mpc' without DP")
    if job.penalty != "l2":
        raise ValueError(f"protocol 'mpc_dp' takes penalty 'l2', not {job.penalty!r}")
    unknown = set(job.options) - set(OPTIONS)
    if unknown:
        raise ValueError(f"protocol 'mpc_dp' has no option(s) {sorted(unknown)} -- its options are {list(OPTIONS)}")
    _momentum(job)
    job_mpc_protocol(job)
    if job.widths:
        mpc_dp_plan(job, [job.widths[name] for name in (job.active, *job.passives)])


def check_party_rows(job: GLMJob, party: str, X: np.ndarray, y: Any) -> None:
    """Each block's rows in the unit ball (the sensitivity's premise), checked by its owner before sharing."""
    from ..dp.sensitivity import check_row_norms

    check_row_norms(X, what="protocol 'mpc_dp'", party=party,
                    reason=" (a row's joined gradient is bounded by its blocks' norms)",
                    remedy="Keep the design's row normalisation (row_norm='clip')")


TRAINING = MPCDPTraining()


def mpc_dp_active(endpoint: Any, job: GLMJob, data: PartyData) -> GLMPartyResult:
    X, _ = data.checked(job, endpoint.name, needs_labels=True)
    check_party_rows(job, endpoint.name, X, None)
    return engine_program(endpoint, job, data, "active", TRAINING)


def mpc_dp_passive(endpoint: Any, job: GLMJob, data: PartyData) -> GLMPartyResult:
    X, _ = data.checked(job, endpoint.name, needs_labels=False)
    check_party_rows(job, endpoint.name, X, None)
    return engine_program(endpoint, job, data, "passive", TRAINING)


PROTOCOL = {"active": mpc_dp_active, "passive": mpc_dp_passive}
TAGS = ("mpc_hello", "mpc_session", "mpc_input", "mpc_run_input", "mpc_reveal")
register_protocol("mpc_dp", PROTOCOL, replace=True, tags=TAGS, check=_check_job, check_rows=check_party_rows,
                  resume_refusal="its weights are secret shares held in every party's engine between runs; "
                                 "no party's checkpoint can hold them")
