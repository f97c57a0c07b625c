"""The DP mechanism layer: catalogue, calibration, parts, accountants, neighbour relations."""
import math

import numpy as np
import pytest

pytest.importorskip("dp_accounting")

from vflsec.dp import (  # noqa: E402
    MECHANISMS,
    GaussianMechanism,
    PLDAccountant,
    RDPAccountant,
    SubsampledGaussianMechanism,
    gaussian_sigma,
    make_accountant,
)
from vflsec.dp.accountant import Release  # noqa: E402
from vflsec.dp.accounting import composed_gaussian, composed_subsampled_gaussian  # noqa: E402
from vflsec.kernels import NoiseGenerator  # noqa: E402


def test_one_part_calibration_is_gaussian_sigma_and_reports_its_target():
    m = GaussianMechanism.calibrated("lattice_gaussian", epsilon=1.5, delta=1e-5, sensitivity=2.0, coordinates=7)
    assert m.sigma == gaussian_sigma(1.5, 1e-5, 2.0, coordinates=7)
    spent = m.privacy_spent()
    assert spent.epsilon <= 1.5 and spent.epsilon == pytest.approx(1.5, rel=5e-3)
    assert spent.neighbours == "replace_one" and spent.delta == 1e-5


def test_parts_split_the_budget_in_mu_squared_and_stay_within_it():
    parts = [("centre", 0.25, 16, 0.05), ("stats", math.sqrt(2.0), 2, 0.05), ("embedding", 2.0, 16, 0.9)]
    m = GaussianMechanism.calibrated("vfl_afe_rescale", epsilon=5.0, delta=1e-2, parts=parts)
    whole = GaussianMechanism.calibrated("lattice_gaussian", epsilon=5.0, delta=1e-2, sensitivity=1.0,
                                         coordinates=34)
    assert m.ratio <= 1.0 / whole.sigma * (1 + 1e-12)
    assert m.ratio == pytest.approx(1.0 / whole.sigma, rel=1e-2)
    for label, _, _, share in parts:
        assert m.part(label).ratio <= math.sqrt(share) / whole.sigma * (1 + 1e-12)
    assert m.coordinates == 34
    assert m.privacy_spent().epsilon <= 5.0


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(name="nope", epsilon=1.0, delta=1e-5, sensitivity=1.0), ValueError, "unknown DP mechanism"),
    (dict(name="noise_embedding", epsilon=1.0, delta=1e-5, sensitivity=1.0), ValueError, "claims no guarantee"),
    (dict(name="lattice_gaussian", epsilon=1.0, delta=1e-5), TypeError, "either sensitivity"),
    (dict(name="lattice_gaussian", epsilon=1.0, delta=1e-5, parts=[("a", 1.0, 1, 0.5), ("b", 1.0, 1, 0.4)]),
     ValueError, "sum to 1"),
    (dict(name="lattice_gaussian", epsilon=1.0, delta=1e-5, parts=[("a", 1.0, 1, 0.5), ("a", 1.0, 1, 0.5)]),
     ValueError, "unique"),
    (dict(name="lattice_gaussian", epsilon=1.0, delta=1e-5, sensitivity=1.0, neighbours="swap"), ValueError,
     "neighbours"),
    (dict(name="lattice_gaussian", epsilon=math.nan, delta=1e-5, sensitivity=1.0), ValueError, "epsilon"),
])
def test_bad_mechanisms_are_refused(kwargs, exc, match):
    name = kwargs.pop("name")
    with pytest.raises(exc, match=match):
        GaussianMechanism.calibrated(name, **kwargs)


def test_release_is_the_lattice_release_with_the_parts_sigma():
    m = GaussianMechanism.calibrated("vfl_afe_rescale", epsilon=2.0, delta=1e-3,
                                     parts=[("centre", 1.0, 4, 0.5), ("embedding", 2.0, 4, 0.5)])
    x = np.zeros(200_000)
    out = m.release(x, generator=NoiseGenerator(1), part="embedding")
    assert np.std(out) == pytest.approx(m.part("embedding").sigma, rel=0.01)
    with pytest.raises(AttributeError, match="parts"):
        _ = m.sigma
    with pytest.raises(KeyError):
        m.part("missing")


def test_the_catalogue_names_every_product_path():
    assert {"lattice_gaussian", "hdp_passive_ir", "hdp_active_ir", "vfl_afe_embedding", "vfl_afe_rescale", "dp_sgd",
            "selection_score", "central_dp_sgd", "mpc_dp_sgd", "central_output_perturbation",
            "central_objective_perturbation", "he_dp_gradient", "trees_gradient", "trees_label_rr", "noise_embedding",
            "noise_gradient"} == set(MECHANISMS)


# -- accountants ------------------------------------------------------------------------------
def test_accountant_state_round_trips_and_counts_releases():
    m = GaussianMechanism.calibrated("lattice_gaussian", epsilon=1.0, delta=1e-5, sensitivity=1.0)
    acc = make_accountant("pld")
    acc.step(m.accounting(3))
    acc.step(m.accounting(2))
    assert len(acc) == 5 and len(acc.history) == 1  # identical releases merge
    again = PLDAccountant()
    again.load_state_dict(acc.state_dict())
    assert again.get_epsilon(1e-5) == acc.get_epsilon(1e-5)
    five = composed_gaussian(m.noise_multiplier, 5, 1e-5, accountant="pld")
    assert acc.get_epsilon(1e-5) == pytest.approx(five.epsilon)
    with pytest.raises(ValueError, match="accountant 'pld', not 'rdp'"):
        RDPAccountant().load_state_dict(acc.state_dict())
    with pytest.raises(ValueError, match="neighbours"):
        PLDAccountant(neighbours="add_remove").load_state_dict(acc.state_dict())
    with pytest.raises(ValueError):
        PLDAccountant().load_state_dict({"accountant": "pld", "neighbours": "replace_one", "history": [[1, 2]]})
    assert make_accountant("rdp").get_epsilon(1e-5) == 0.0


@pytest.mark.slow  # subsampled PLD calibrations
def test_replace_one_costs_more_than_add_remove_under_subsampling():
    replace = composed_subsampled_gaussian(1.0, 0.05, 100, 1e-5, neighbours="replace_one").epsilon
    add_remove = composed_subsampled_gaussian(1.0, 0.05, 100, 1e-5, neighbours="add_remove").epsilon
    assert replace > 1.3 * add_remove
    # Without subsampling a replaced record moves the sum by 2C: the Gaussian at multiplier z / 2.
    full = composed_subsampled_gaussian(2.0, 1.0, 3, 1e-5, neighbours="replace_one").epsilon
    assert full == pytest.approx(composed_gaussian(1.0, 3, 1e-5).epsilon)


def test_rdp_refuses_replace_one_subsampling():
    with pytest.raises(ValueError, match="use accountant='pld'"):
        RDPAccountant().step(Release(1.0, 0.1, 1, 10))
    with pytest.raises(ValueError, match="use accountant='pld'"):
        SubsampledGaussianMechanism("dp_sgd", 1.0, 0.1, 10, 5, accountant="rdp")
    RDPAccountant(neighbours="add_remove").step(Release(1.0, 0.1, 1, 10))


@pytest.mark.slow  # subsampled PLD calibrations
@pytest.mark.parametrize("rate, steps", [(1.0, 1), (0.05, 40)])
def test_subsampled_calibration_and_report_agree_within_the_target(rate, steps):
    m = SubsampledGaussianMechanism.calibrated("dp_sgd", epsilon=2.0, delta=1e-3, sampling_rate=rate, steps=steps,
                                               coordinates=50)
    spent = m.privacy_spent()
    assert spent.epsilon <= 2.0 and spent.epsilon == pytest.approx(2.0, rel=2e-3)
    weaker = SubsampledGaussianMechanism("dp_sgd", m.noise_multiplier * 0.98, rate, steps, 50)
    assert weaker.privacy_spent(delta=1e-3).epsilon > 2.0
    assert m.sigma(3.0) >= 3.0 * m.noise_multiplier
    # One step at rate 1 under replace-one: sigma / C is twice the Gaussian multiplier of (2, 1e-3).
    if rate == 1.0:
        z_gauss = GaussianMechanism.calibrated("lattice_gaussian", epsilon=2.0, delta=1e-3, sensitivity=1.0,
                                               coordinates=50).sigma
        assert m.noise_multiplier == pytest.approx(2.0 * z_gauss, rel=2e-3)
