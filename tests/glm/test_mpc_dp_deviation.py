"""DP inside MPC against a party that deviates with its inputs (issue 39): the unit-ball premise of
the sensitivity is checked by each block's owner before sharing (check_party_rows), not inside the
engine, so a passive party that inputs an oversized row is not stopped. Measured here on the
engine's own release function, in the clear as the audit runs it: with one row of norm M at a
coordinate no other row uses, its revealed block reads that row's clamped slope times M plus the
noise, and the sign of the slope is the active party's label. The threat model
(glm/mpc_dp.py, docs/threat-model.md) states it: the guarantee holds for parties that input rows
in the unit ball."""
import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("dp_accounting")

from vflsec.audit import cases_mpc_dp  # noqa: E402
from vflsec.glm.mpc_dp import noisy_gradient_sums  # noqa: E402
from vflsec.kernels import NoiseGenerator  # noqa: E402

ROWS, TRIALS = 8, 400


def _label_guesses(row_norm: float, seed: int) -> float:
    """The fraction of targeted labels the passive party reads from its revealed block."""
    import jax.numpy as jnp
    from jax.experimental import enable_x64

    plan = cases_mpc_dp._plan()
    rng = np.random.default_rng(seed)
    generator = NoiseGenerator(f"mpc_dp deviation {seed} {row_norm}".encode())
    right = 0
    with enable_x64():
        for trial in range(TRIALS):
            target = trial % ROWS
            active = rng.normal(size=(ROWS, 2))
            active /= np.maximum(1.0, np.linalg.norm(active, axis=1))[:, None]
            y = np.where(rng.random(ROWS) < 0.5, 1.0, -1.0)
            passive = np.zeros((ROWS, 2))
            passive[:, 1] = rng.uniform(-1, 1, ROWS)  # honest-looking second column
            passive[target, 0] = row_norm            # the probe: a coordinate only the target row uses
            # the other party's noise share (the passive party subtracts its own)
            other = cases_mpc_dp._noise_share(plan, 1, generator)
            weights = [jnp.zeros(2), jnp.zeros(2)]
            sums = noisy_gradient_sums([jnp.asarray(active), jnp.asarray(passive)], jnp.asarray(y), weights,
                                       jnp.ones(ROWS, dtype=bool),
                                       [jnp.asarray(other[:, :2]), jnp.asarray(other[:, 2:])])
            read = float(np.asarray(sums[1])[0, 0])  # slope_target * row_norm + noise
            right += int(np.sign(-read) == y[target])  # slope = -y sigmoid(-y theta): its sign is -y
    return right / TRIALS


def test_an_oversized_row_reads_the_active_partys_labels_through_the_noise():
    plan = cases_mpc_dp._plan()
    honest = _label_guesses(1.0, seed=1)  # the unit ball's largest row: the noise hides the slope
    deviating = _label_guesses(1e4 * plan.sigma, seed=2)
    assert honest < 0.6  # sigma is several times the slope's +-1/2: near chance
    assert deviating > 0.99  # the row's weight drowns the noise: every label read
