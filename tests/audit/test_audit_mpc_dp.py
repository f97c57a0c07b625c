"""The audit of DP-SGD inside MPC ("mpc_dp_sgd"): its pair reaches the stated sensitivity, its lower
bound stays below the product's claim, and the same audit catches a release with half the noise."""
import dataclasses

import pytest

pytest.importorskip("jax")
pytest.importorskip("dp_accounting")

from vflsec.audit import cases_mpc_dp  # noqa: E402
from vflsec.audit.cases import CASES  # noqa: E402
from vflsec.audit.runner import audit_case, violations  # noqa: E402
from vflsec.kernels import lattice_spacing  # noqa: E402

NAME = "mpc_dp_sgd[one step, q = 1, a party's view]"
RUNS = 200_000  # the quick audit's count: under a second once jax is loaded


def test_the_party_view_stays_below_the_claim_on_a_pair_at_the_stated_sensitivity():
    row = audit_case(CASES[NAME], runs=RUNS, seed=0)
    assert row["mechanism"] == "mpc_dp_sgd" and row["claimed_epsilon"] == pytest.approx(2.0, abs=0.01)
    assert 0.999 < row["realized_sensitivity_ratio"] <= 1.0  # a worst-case pair (float64 misses the slack only)
    assert not violations([row]), violations([row])
    # The one-step release is tight: its Gaussian fit agrees with the claim (a looser noise would fit below).
    low, high = row["fitted_epsilon_interval"]
    assert low < row["claimed_epsilon"] < high * 1.05


def test_the_audit_catches_a_release_with_half_its_noise(monkeypatch):
    plan = cases_mpc_dp._plan

    def half_noise():
        full = plan()
        return dataclasses.replace(full, sigma=full.sigma / 2, spacing=lattice_spacing(full.sigma / 2))

    monkeypatch.setattr(cases_mpc_dp, "_plan", half_noise)
    row = audit_case(CASES[NAME], runs=RUNS, seed=0)
    assert row["lower_bound"] > row["claimed_epsilon"]
    assert any(NAME in v and "exceeds the claimed" in v for v in violations([row]))
