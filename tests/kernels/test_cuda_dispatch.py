"""CUDA dispatch that runs everywhere: availability, device arguments and
clear errors on machines and builds without CUDA."""
import numpy as np
import pytest

import vflsec
from vflsec import kernels
from vflsec.kernels import NoiseGenerator, _cuda

torch = pytest.importorskip("torch")
torch.set_num_threads(1)


def test_cuda_available_is_a_bool_and_consistent():
    available = vflsec.cuda_available()
    assert isinstance(available, bool)
    try:
        from vflsec import _core_cuda
    except ImportError:
        assert available is False
    else:
        assert available == (_core_cuda.device_count() > 0)


def test_cpu_tensors_are_not_routed_to_cuda():
    X = torch.from_numpy(np.random.default_rng(0).standard_normal((5, 3)))
    assert not _cuda.is_cuda_tensor(X) and not _cuda.is_cuda_tensor(X.numpy())
    D = kernels.pairwise_distances(X)
    assert isinstance(D, torch.Tensor) and D.device.type == "cpu"


def test_gaussian_noise_device_cpu_gives_the_numpy_stream_as_a_tensor():
    got = kernels.gaussian_noise((4, 5), 2.0, dtype=torch.float32, generator=NoiseGenerator(seed=3), device="cpu")
    want = kernels.gaussian_noise((4, 5), 2.0, dtype="float32", generator=NoiseGenerator(seed=3))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("device", ["tpu", "meta", "not a device", 3.5])
def test_gaussian_noise_rejects_other_devices(device):
    with pytest.raises(ValueError, match="device must be"):
        kernels.gaussian_noise(3, device=device)


@pytest.mark.skipif(torch.cuda.is_available() and vflsec.cuda_available(), reason="a CUDA device is present")
def test_cuda_device_without_gpu_is_a_clear_error():
    with pytest.raises(RuntimeError, match="CUDA"):
        kernels.gaussian_noise(3, device="cuda")


def test_missing_cuda_module_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(_cuda, "_module", None)
    monkeypatch.setattr(_cuda, "_import_error", ImportError("No module named 'vflsec._core_cuda'"))
    assert vflsec.cuda_available() is False
    with pytest.raises(RuntimeError, match="VFLSEC_CUDA=ON"):
        _cuda._require()


def test_no_usable_device_is_a_clear_error():
    try:
        from vflsec import _core_cuda
    except ImportError:
        pytest.skip("vflsec built without its CUDA kernels")
    if _core_cuda.device_count() > 0:
        pytest.skip("a CUDA device is usable here")
    with pytest.raises(RuntimeError, match="can use no device"):
        _cuda._require()
