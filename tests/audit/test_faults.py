"""The auditor against a broken copy of the product: with half the noise in every release
(vflsec.audit.faults.halved_noise), every catalogued mechanism with a claim fails its audit, or
its case says why it cannot; the same cases pass the honest product."""
import math

import numpy as np
import pytest

pytest.importorskip("dp_accounting")

from vflsec import kernels  # noqa: E402  (its attributes read at call time: the fault patches them)
from vflsec.audit.cases import load_cases  # noqa: E402
from vflsec.audit.faults import halved_noise  # noqa: E402
from vflsec.audit.runner import audit_case, self_test_misses, violations  # noqa: E402
from vflsec.dp.mechanisms import MECHANISMS  # noqa: E402
from vflsec.kernels import NoiseGenerator, lattice_spacing  # noqa: E402

SIGMA = 3.0

# Per mechanism with a claim: the case whose halved-noise copy the test runs, and its runs per world
# (the quick audit's, or more where the quick count cannot certify a bound above the claim).
FAULT_CASES = {
    "lattice_gaussian": ("lattice_gaussian[float64]", 200_000),
    "hdp_passive_ir": ("hdp_passive_ir[malicious active]", 2_000),
    "hdp_active_ir": ("hdp_active_ir[malicious passive]", 2_000),
    "selection_score": ("selection_score", 200_000),
    "he_dp_gradient": ("he_dp_gradient[taylor_dp]", 2_000),
    "vfl_afe_embedding": ("vfl_afe[vanilla]", 3_000),
    "vfl_afe_rescale": ("vfl_afe[R, no shrink]", 20_000),
    "dp_sgd": ("dp_sgd[one step, q = 1]", 2_000),
    "central_output_perturbation": ("central_output_perturbation", 200_000),
    "central_dp_sgd": ("central_dp_sgd[one step, q = 1]", 2_000),
    "mpc_dp_sgd": ("mpc_dp_sgd[one step, q = 1, a party's view]", 200_000),
    "trees_gradient": ("trees_gradient[one round]", 200_000),
    "trees_label_rr": ("trees_label_rr[stage one]", 200_000),
}
FAST = {"lattice_gaussian", "selection_score", "central_output_perturbation", "trees_label_rr"}


def test_halved_noise_halves_every_release_on_the_honest_lattice_and_restores_it():
    x = np.full(200_000, 0.3)
    with halved_noise():
        released = kernels.add_gaussian_noise(x, SIGMA, generator=NoiseGenerator(b"fault"))
        steps = kernels.lattice_gaussian((200_000,), SIGMA, generator=NoiseGenerator(b"fault"))
        single = kernels.add_gaussian_noise(np.float32(0.3), SIGMA, generator=NoiseGenerator(b"one"))
    g = lattice_spacing(SIGMA)
    assert released.std() == pytest.approx(SIGMA / 2, rel=0.02)
    assert np.array_equal(np.rint(released / g) * g, released)  # still on the lattice the caller asked for
    assert (steps * g).std() == pytest.approx(SIGMA / 2, rel=0.02)
    assert single.dtype == np.float32 and single.shape == ()
    honest = kernels.add_gaussian_noise(x, SIGMA, generator=NoiseGenerator(b"fault"))
    assert honest.std() == pytest.approx(SIGMA, rel=0.02)  # the context restored the release


def test_halved_noise_reaches_torch_tensors_and_randomized_response():
    torch = pytest.importorskip("torch")
    from vflsec.dp.randomized_response import RandomizedResponseMechanism

    mechanism = RandomizedResponseMechanism("trees_label_rr", 1.0)
    honest_keep = mechanism.keep_probability
    with halved_noise():
        zeros = torch.zeros(100_000, dtype=torch.float64)
        out = kernels.add_gaussian_noise(zeros, SIGMA, generator=NoiseGenerator(b"t"))
        keep = mechanism.keep_probability
    assert isinstance(out, torch.Tensor) and float(out.std()) == pytest.approx(SIGMA / 2, rel=0.02)
    assert keep == pytest.approx(math.exp(2.0) / (1 + math.exp(2.0)), rel=1e-12)
    assert mechanism.keep_probability == honest_keep


def test_every_mechanism_with_a_claim_has_a_fault_case_or_states_its_limit():
    cases = load_cases()
    limited = {c.mechanism for c in cases.values() if c.limit}
    for name, info in MECHANISMS.items():
        if not info.claims:
            continue
        assert name in FAULT_CASES or name in limited, f"{name}: no case shown to catch half the noise"
        if name in FAULT_CASES:
            assert cases[FAULT_CASES[name][0]].mechanism == name


def _fault_params():
    for mechanism, (case, runs) in FAULT_CASES.items():
        marks = [] if mechanism in FAST else [pytest.mark.slow]
        yield pytest.param(mechanism, case, runs, marks=marks, id=mechanism)


@pytest.mark.parametrize("mechanism, case_name, runs", list(_fault_params()))
def test_the_audit_fails_a_copy_with_half_the_noise_and_passes_the_product(mechanism, case_name, runs):
    if mechanism == "mpc_dp_sgd":
        pytest.importorskip("jax")
    if mechanism in ("vfl_afe_embedding", "vfl_afe_rescale", "dp_sgd"):
        pytest.importorskip("torch")
    case = load_cases()[case_name]
    honest = audit_case(case, runs=runs, seed=0)
    assert not violations([honest]), violations([honest])
    with halved_noise():
        broken = audit_case(case, runs=runs, seed=0)
    assert violations([broken]), (f"{case_name}: half the noise passes: lower/claim "
                                  f"{broken['lower_bound_over_claim']:.3g}, noise check {broken['noise_check']}")


def test_a_mechanism_passing_its_halved_copy_fails_the_self_test_unless_a_case_states_why():
    def row(case, mechanism, caught, limit=None):
        return {"case": case, "mechanism": mechanism, "claimed_epsilon": 1.0, "limit": limit,
                "halved_noise": {"caught": caught}}

    assert self_test_misses([row("a", "m", False), row("b", "m", True)]) == []  # one case of m catches it
    assert self_test_misses([row("a", "m", False, limit="why")]) == []
    missed = self_test_misses([row("a", "m", False), row("b", "m", False)])
    assert len(missed) == 1 and missed[0].startswith("m:") and "a, b" in missed[0]
