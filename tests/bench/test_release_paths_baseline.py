"""The split-learning benchmark's baseline VFL-AFE (vflsec.bench.experiments.splitnn.baseline) releases
through the lattice Gaussian mechanism as the product's VFLAFE does (tests/dp/test_release_paths.py
checks every product release path)."""
import numpy as np
import pytest

from vflsec.kernels import lattice_spacing


def _numpy(values):
    if hasattr(values, "detach"):  # torch tensor (float32 converts to float64 exactly)
        values = values.detach().cpu().double().numpy()
    return np.asarray(values, dtype=np.float64)


def assert_on_lattice(values, sigma):
    k = _numpy(values) / lattice_spacing(sigma)  # exact: the spacing is a power of two
    assert k.size and np.all(np.isfinite(k))
    assert np.array_equal(k, np.rint(k)), "a released value is off the release lattice"


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def _batch():
    from vflsec.splitnn.defenses import BatchInfo

    return BatchInfo(epoch=0, step=0, global_step=0, indices=np.arange(4, dtype=np.int64))


def _afe(impl="vflsec", **kw):
    from vflsec.bench.experiments.splitnn.baseline import afe_class  # "baseline": the benchmark's subclass
    from vflsec.splitnn.defenses import DefenseContext

    kw.setdefault("calibration", "analytic")
    d = afe_class(impl)(seed=0, **kw)
    d.setup(DefenseContext(n_classes=2, passive_parties=("p",), n_samples=100, batch_size=10, epochs=2,
                           extra={"embedding_dims": {"p": 8}}))
    return d


@pytest.mark.parametrize("impl", ["baseline"])
def test_vfl_afe_forward_releases_on_the_lattice(torch, impl):
    d = _afe(t=1.5, epsilon=2.0, impl=impl)  # full: clip, +R "dp", noise
    bottom = torch.nn.Linear(5, 8)
    h = bottom(torch.randn(32, 5))
    out = d.transform_embedding("p", h, _batch())
    assert out.dtype == torch.float32 and out.shape == (32, 8)
    # Every part of the +R release is a lattice release with its part's sigma; the output
    # is the released deviations plus the released centre (post-processing).
    mechanism = d.mechanism_for(8, 32)
    assert mechanism.name == "vfl_afe_rescale"
    parts = d.last_release_["p"]
    for label in ("centre", "stats", "embedding"):
        assert_on_lattice(parts[label], mechanism.part(label).sigma)
    assert d.release_sigma(8, 32) == mechanism.part("embedding").sigma
    assert torch.equal(out.detach(), parts["embedding"] + parts["centre"].to(torch.float32))
    # The bottom model still trains through the release (identity for autograd).
    (out * torch.ones_like(out)).sum().backward()
    assert bottom.weight.grad is not None and torch.isfinite(bottom.weight.grad).all()


@pytest.mark.parametrize("impl", ["baseline"])
def test_vfl_afe_paper_rescale_releases_on_the_lattice(torch, impl):
    d = _afe(t=1.5, epsilon=2.0, impl=impl, rescale_estimate="batch")  # the paper's rule: one-part release
    out = d.transform_embedding("p", torch.nn.Linear(5, 8)(torch.randn(32, 5)), _batch())
    assert_on_lattice(out, d.release_sigma(8))
