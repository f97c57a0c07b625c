"""VFL-AFE's DP parameters: epsilon is the whole training run's budget, the paper's
per-release meaning is the explicit ``epsilon_per_release``, delta follows the shared rule."""
import warnings

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from vflsec.dp import PrivacyWarning, default_delta  # noqa: E402
from vflsec.dp.mechanisms import GaussianMechanism  # noqa: E402
from vflsec.splitnn.defenses import VFLAFE, DefenseContext  # noqa: E402


def _set_up(defense, *, n=90, batch_size=30, epochs=3, width=4):
    """Set up for a 3-epoch job of 90 rows (a delta of 1e-2 is then below 1/n: no warning)."""
    defense.setup(DefenseContext(n_classes=2, passive_parties=("p",), n_samples=n, batch_size=batch_size,
                                 epochs=epochs, extra={"embedding_dims": {"p": width}}))
    return defense


@pytest.mark.parametrize("rescale", [False, True])
@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_epsilon_is_the_whole_run(rescale, accountant):
    # The case: epsilon = 5 over 3 epochs used to report 12.4; now it is the total.
    d = _set_up(VFLAFE(t=1.0, epsilon=5.0, delta=1e-5, rescale=rescale, adjust=False, accountant=accountant,
                       seed=0))
    spent = d.privacy_spent()
    assert spent.releases == 3 and spent.accountant == accountant
    assert 0.98 * 5.0 <= spent.epsilon <= 5.0
    assert spent.epsilon_per_release < 5.0 / 1.5
    assert d.epsilon_ == 5.0 and d.delta_ == 1e-5


def test_epsilon_per_release_keeps_the_papers_meaning():
    per_release = _set_up(VFLAFE(t=1.0, epsilon_per_release=5.0, delta=1e-2, rescale=False, adjust=False))
    assert per_release.epsilon_ is None
    # Each release is calibrated exactly as one (5, 1e-2) Gaussian release; 3 compose to more than 5.
    reference = GaussianMechanism.calibrated("vfl_afe_embedding", epsilon=5.0, delta=1e-2, sensitivity=2.0,
                                             coordinates=4)
    assert per_release.mechanism_for(4).sigma == reference.sigma
    spent = per_release.privacy_spent()
    # (sigma on the release's grid: at most 0.4 % above the continuous calibration's)
    assert 0.99 * 5.0 <= spent.epsilon_per_release <= 5.0 and spent.epsilon > 10.0
    total = _set_up(VFLAFE(t=1.0, epsilon=5.0, delta=1e-2, rescale=False, adjust=False))
    assert total.mechanism_for(4).sigma > 1.5 * reference.sigma


def test_a_one_epoch_run_is_calibrated_as_its_one_release():
    total = _set_up(VFLAFE(t=1.0, epsilon=5.0, delta=1e-2, adjust=False), epochs=1)
    per_release = _set_up(VFLAFE(t=1.0, epsilon_per_release=5.0, delta=1e-2, adjust=False), epochs=1)
    for rows in (30, None):
        assert total.mechanism_for(4, rows).parts == per_release.mechanism_for(4, rows).parts
    assert total.privacy_spent().epsilon == per_release.privacy_spent().epsilon <= 5.0


def test_default_epsilon_and_delta():
    d = _set_up(VFLAFE(t=1.0, adjust=False), n=50_000)
    assert d.epsilon is None and d.delta is None  # stored as given; resolved by setup()
    assert d.epsilon_ == 1.0 and d.delta_ == default_delta(50_000) == 2e-6
    spent = d.privacy_spent()
    assert spent.delta == 2e-6 and 0.98 <= spent.epsilon <= 1.0


def test_an_explicit_delta_of_at_least_one_over_n_is_kept_with_a_warning():
    d = VFLAFE(t=1.0, epsilon=2.0, delta=1e-2, adjust=False)
    with pytest.warns(PrivacyWarning, match=r"delta=0.01 is at least 1/n = 0.01 for n=100 rows"):
        _set_up(d, n=100, batch_size=10)
    assert d.delta_ == 1e-2 and d.privacy_spent().delta == 1e-2
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        _set_up(VFLAFE(t=1.0, epsilon=2.0, delta=1e-3, adjust=False), n=100, batch_size=10)


def test_parameter_checks_name_the_parameters():
    with pytest.raises(ValueError, match="not both"):
        VFLAFE(epsilon=1.0, epsilon_per_release=1.0).check_params()
    with pytest.raises(ValueError, match="epsilon_per_release"):
        VFLAFE(epsilon=1.0, calibration="classic").check_params()
    with pytest.raises(ValueError, match="epsilon_per_release"):
        VFLAFE(epsilon_per_release=0.0).check_params()
    with pytest.raises(ValueError, match="delta"):
        VFLAFE(delta=1.0).check_params()
    # The classic formula misses epsilon 20 at delta 1e-2: the error names VFLAFE's parameter.
    with pytest.raises(ValueError, match=r"calibration='analytic'") as info:
        _set_up(VFLAFE(epsilon_per_release=20.0, delta=1e-2, calibration="classic", adjust=False))
    assert "method=" not in str(info.value)


def test_mechanisms_need_the_run_unless_a_release_is_fixed_alone():
    with pytest.raises(RuntimeError, match="setup"):
        VFLAFE(epsilon=1.0, delta=1e-5).mechanism_for(4)
    with pytest.raises(RuntimeError, match="setup"):
        VFLAFE(epsilon_per_release=1.0).mechanism_for(4)  # delta None: the default depends on the rows
    # One release at (epsilon_per_release, delta) does not depend on the run: usable before setup().
    alone = VFLAFE(t=1.0, epsilon_per_release=2.0, delta=1e-5, rescale=False, adjust=False)
    set_up = _set_up(VFLAFE(t=1.0, epsilon_per_release=2.0, delta=1e-5, rescale=False, adjust=False))
    assert alone.mechanism_for(4) == set_up.mechanism_for(4)
    assert alone.release("p", torch.zeros(3, 4)).shape == (3, 4)
