"""vflsec.kernels on CUDA tensors, against the CPU kernels. Needs a CUDA GPU,
a CUDA build of torch and vflsec built with its CUDA kernels; skipped otherwise."""
import numpy as np
import pytest

import vflsec
from vflsec import kernels
from vflsec.kernels import NoiseGenerator

torch = pytest.importorskip("torch")
torch.set_num_threads(1)



def _why_not() -> str:
    try:
        from vflsec import _core_cuda
    except ImportError:
        return "vflsec built without its CUDA kernels (VFLSEC_CUDA)"
    return f"vflsec._core_cuda: {_core_cuda.device_status()}; torch.cuda.is_available()={torch.cuda.is_available()}"


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not (torch.cuda.is_available() and vflsec.cuda_available()),
                       reason=f"needs a CUDA device, CUDA torch and vflsec's CUDA kernels ({_why_not()})"),
]

DEV = "cuda"
TORCH = {np.float32: torch.float32, np.float64: torch.float64}
RTOL = {np.float32: 1e-5, np.float64: 1e-13}


def on_gpu(a):
    return torch.from_numpy(np.ascontiguousarray(a)).to(DEV)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,m,d", [(1, 1, 1), (37, 45, 3), (130, 67, 300), (257, 5, 600)])
def test_distances_match_cpu(dtype, n, m, d):
    rng = np.random.default_rng(n + m + d)
    X = (rng.standard_normal((n, d)) + 100.0).astype(dtype)
    Y = (rng.standard_normal((m, d)) + 100.0).astype(dtype)
    for squared in (False, True):
        got = kernels.pairwise_distances(on_gpu(X), on_gpu(Y), squared=squared)
        assert got.is_cuda and got.dtype == TORCH[dtype] and tuple(got.shape) == (n, m) and got.is_contiguous()
        want = kernels.pairwise_distances(X, Y, squared=squared)
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=4 * RTOL[dtype], atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_distances_self_zero_diagonal_symmetric(dtype):
    X = (np.random.default_rng(0).standard_normal((300, 64)) * 1e-3 + 1e4).astype(dtype)
    Xg = on_gpu(X)
    for D in (kernels.pairwise_distances(Xg), kernels.pairwise_distances(Xg, Xg.clone())):
        assert torch.all(torch.diagonal(D) == 0)
        assert torch.equal(D, D.T)


def test_distances_scaled_and_mixed_and_int_inputs():
    rng = np.random.default_rng(1)
    X = (rng.standard_normal((20, 7)) * 1e30).astype(np.float32)
    got = kernels.pairwise_distances(on_gpu(X))
    np.testing.assert_allclose(got.cpu().numpy(), kernels.pairwise_distances(X), rtol=1e-5)
    Y = rng.standard_normal((9, 7))
    mixed = kernels.pairwise_distances(on_gpu(X / 1e30), on_gpu(Y))
    assert mixed.dtype == torch.float64
    ints = kernels.pairwise_distances(on_gpu(np.arange(12).reshape(4, 3)))
    assert ints.dtype == torch.float64
    np.testing.assert_allclose(ints.cpu().numpy(), kernels.pairwise_distances(np.arange(12).reshape(4, 3)))


def test_distances_bad_input():
    X = torch.zeros((4, 3), device=DEV)
    with pytest.raises(ValueError, match="NaN or infinite"):
        kernels.pairwise_distances(torch.full((4, 3), float("nan"), device=DEV))
    with pytest.raises(ValueError, match="same number of columns"):
        kernels.pairwise_distances(X, torch.zeros((4, 2), device=DEV))
    with pytest.raises(ValueError, match="2-dimensional"):
        kernels.pairwise_distances(torch.zeros(4, device=DEV))
    with pytest.raises(ValueError, match="empty"):
        kernels.pairwise_distances(torch.zeros((0, 3), device=DEV))
    with pytest.raises(TypeError, match="CUDA tensor"):
        kernels.pairwise_distances(X, torch.zeros((4, 3)))
    with pytest.raises(TypeError, match="X is not"):
        kernels.pairwise_distances(np.zeros((4, 3)), X)
    with pytest.raises(TypeError, match="boolean"):
        kernels.pairwise_distances(X.bool())


def test_distances_on_a_side_stream():
    X = on_gpu(np.random.default_rng(2).standard_normal((500, 32)))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        D = kernels.pairwise_distances(X)
        total = D.sum()
    torch.cuda.current_stream().wait_stream(stream)
    np.testing.assert_allclose(float(total), kernels.pairwise_distances(X.cpu().numpy()).sum(), rtol=1e-12)


def test_kernels_leave_the_current_device_alone():
    # The kernels switch to the tensor's device and back; with one GPU this
    # checks that the switch-back runs, with two that a tensor on the other
    # device is computed there.
    last = torch.cuda.device_count() - 1
    before = torch.cuda.current_device()
    X = torch.randn(64, 8, dtype=torch.float64, device=f"cuda:{last}")
    D = kernels.pairwise_distances(X)
    stats = kernels.pairwise_distance_stats(X)
    noisy = kernels.add_gaussian_noise(X, 0.5, generator=NoiseGenerator(seed=1))
    assert D.device == X.device and noisy.device == X.device
    assert torch.cuda.current_device() == before
    np.testing.assert_allclose(D.cpu().numpy(), kernels.pairwise_distances(X.cpu().numpy()), rtol=1e-13)
    assert stats.count == 64 * 63 // 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d", [(2, 1), (67, 3), (1000, 16), (3001, 5)])
def test_distance_stats_match_cpu(dtype, n, d):
    X = np.random.default_rng(n).standard_normal((n, d)).astype(dtype)
    got = kernels.pairwise_distance_stats(on_gpu(X))
    want = kernels.pairwise_distance_stats(X)
    assert got.count == want.count == n * (n - 1) // 2
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose([got.mean, got.std, got.min, got.max], [want.mean, want.std, want.min, want.max],
                               rtol=rtol)
    # deterministic
    assert kernels.pairwise_distance_stats(on_gpu(X)) == got


def test_distance_stats_errors():
    with pytest.raises(ValueError, match="at least 2 rows"):
        kernels.pairwise_distance_stats(torch.zeros((1, 3), device=DEV))
    with pytest.raises(ValueError, match="NaN"):
        kernels.pairwise_distance_stats(torch.tensor([[0.0], [float("inf")]], device=DEV))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [2.0, 1.5, 2.3])
def test_fcm_matches_cpu(dtype, m, blobs):
    X = blobs(2000, 8, 4, dtype)
    start = X[[0, 500, 1000, 1500]].copy()
    got = kernels.fuzzy_cmeans(on_gpu(X), 4, m=m, max_iter=200, tol=1e-4, init=on_gpu(start))
    want = kernels.fuzzy_cmeans(X, 4, m=m, max_iter=200, tol=1e-4, init=start)
    for field in ("centers", "membership", "labels", "confidence", "objective_history"):
        assert getattr(got, field).is_cuda
    rtol = 1e-4 if dtype == np.float32 else 1e-9
    np.testing.assert_allclose(got.centers.cpu().numpy(), want.centers, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(got.membership.cpu().numpy(), want.membership, rtol=rtol, atol=rtol)
    np.testing.assert_array_equal(got.labels.cpu().numpy(), want.labels)
    assert got.converged == want.converged
    np.testing.assert_allclose(got.objective, want.objective, rtol=rtol)


@pytest.mark.parametrize("init", [None, "random", "kmeans++"])
def test_fcm_seeded_starts_match_cpu(init, blobs):
    X = blobs(600, 3, 3, np.float64, seed=4)
    got = kernels.fuzzy_cmeans(on_gpu(X), 3, init=init, seed=11, max_iter=50, tol=1e-8)
    want = kernels.fuzzy_cmeans(X, 3, init=init, seed=11, max_iter=50, tol=1e-8)
    np.testing.assert_allclose(got.centers.cpu().numpy(), want.centers, rtol=1e-7, atol=1e-7)
    assert got.n_iter == want.n_iter


def test_fcm_errors(blobs):
    X = on_gpu(blobs(50, 2, 2, np.float64))
    with pytest.raises(ValueError, match="between 2"):
        kernels.fuzzy_cmeans(X, 1)
    with pytest.raises(ValueError, match="no weight"):
        kernels.fuzzy_cmeans(X, 2, init=np.tile([1.0, 0.0], (50, 1)))
    with pytest.raises(ValueError, match="sum to 1"):
        kernels.fuzzy_cmeans(X, 2, init=np.full((50, 2), 0.7))
    with pytest.raises(ValueError, match="NaN"):
        kernels.fuzzy_cmeans(torch.full((5, 2), float("nan"), device=DEV), 2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 8, 1001, 100_003])
def test_seeded_gpu_noise_equals_cpu_bit_for_bit(dtype, n):
    got = kernels.gaussian_noise(n, 3.0, dtype=dtype, generator=NoiseGenerator(seed=5), device=DEV)
    want = kernels.gaussian_noise(n, 3.0, dtype=dtype, generator=NoiseGenerator(seed=5))
    assert got.is_cuda
    assert torch.equal(got.cpu(), torch.from_numpy(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_seeded_gpu_add_noise_equals_cpu(dtype):
    x = (np.random.default_rng(0).standard_normal((123, 7)) * 10).astype(dtype)
    got = kernels.add_gaussian_noise(on_gpu(x), 0.5, generator=NoiseGenerator(seed=b"s"))
    want = kernels.add_gaussian_noise(x, 0.5, generator=NoiseGenerator(seed=b"s"))
    assert got.is_cuda and tuple(got.shape) == x.shape
    assert torch.equal(got.cpu(), torch.from_numpy(want))


def test_raw_keystream_on_gpu_equals_cpu():
    from vflsec import _core_cuda

    out = torch.empty(1001, dtype=torch.int64, device=DEV)
    _core_cuda.fill_raw(NoiseGenerator(seed=0)._core_gen, out.data_ptr(), out.numel(), out.device.index,
                        torch.cuda.current_stream().cuda_stream)
    want = NoiseGenerator(seed=0).random_raw(1001).view(np.int64)
    np.testing.assert_array_equal(out.cpu().numpy(), want)


def test_gpu_and_cpu_draws_continue_one_stream():
    gen = NoiseGenerator(seed=8)
    a = gen.normal(10)
    b = kernels.gaussian_noise(20, generator=gen, device=DEV)
    c = gen.normal(3)
    ref = NoiseGenerator(seed=8)
    np.testing.assert_array_equal(a, ref.normal(10))
    np.testing.assert_array_equal(b.cpu().numpy(), ref.normal(20))
    np.testing.assert_array_equal(c, ref.normal(3))


def test_secure_gpu_noise():
    a = kernels.gaussian_noise(10**6, device=DEV)
    b = kernels.gaussian_noise(10**6, device=DEV)
    assert not torch.equal(a, b)
    assert abs(float(a.mean())) < 0.01 and abs(float(a.std()) - 1.0) < 0.01


def test_noise_edge_cases():
    gen = NoiseGenerator(seed=1)
    z = kernels.gaussian_noise((3, 0), generator=gen, device=DEV)
    assert z.shape == (3, 0) and gen.blocks_used == 0
    zeros = kernels.gaussian_noise(5, 0.0, generator=gen, device=DEV)
    assert torch.all(zeros == 0) and gen.blocks_used == 0
    x = torch.ones(4, device=DEV)
    assert torch.equal(kernels.add_gaussian_noise(x, 0.0), x)
    with pytest.raises(ValueError, match="too large to release"):
        kernels.add_gaussian_noise(torch.full((64,), 3.4e38, device=DEV), 1e37)
    with pytest.raises(ValueError, match="NaN"):
        kernels.add_gaussian_noise(torch.tensor([1.0, float("nan")], device=DEV), 1.0)


# -- the split-learning DP defenses on CUDA tensors (the mechanisms' releases: noise drawn on the CPU's
#    ChaCha20 stream, values returned on the tensor's device) --------------------------------------------
def _afe(**params):
    pytest.importorskip("dp_accounting")  # the defenses' guarantee (calibration for DP-SGD)
    from vflsec.splitnn.defenses import DefenseContext
    from vflsec.splitnn.defenses.vfl_afe import VFLAFE

    d = VFLAFE(t=1.0, epsilon=5.0, delta=1e-2, seed=3, **params)
    d.setup(DefenseContext(n_classes=2, passive_parties=("p",), n_samples=64, batch_size=16, epochs=2,
                           extra={"embedding_dims": {"p": 6}}))
    return d


@pytest.mark.parametrize("params", [dict(rescale=False, adjust=False), dict(rescale=True, adjust=False),
                                    dict(rescale=True, adjust=True, rescale_estimate="batch")])
def test_vfl_afe_release_on_gpu_matches_cpu(params):
    from vflsec.splitnn.defenses import BatchInfo

    h = np.random.default_rng(5).standard_normal((16, 6)) * 0.7
    batch = BatchInfo(0, 0, 0, np.arange(16))
    cpu = _afe(**params).transform_embedding("p", torch.from_numpy(h), batch)
    gpu_defense = _afe(**params)
    gpu = gpu_defense.transform_embedding("p", on_gpu(h), batch)
    assert gpu.is_cuda and gpu.dtype == cpu.dtype and tuple(gpu.shape) == (16, 6)
    # Same seeded streams; the GPU's distance statistics may differ in the last bits, which can move a noisy
    # statistic by one lattice step, so the outputs agree closely rather than bit for bit.
    np.testing.assert_allclose(gpu.cpu().numpy(), cpu.numpy(), rtol=0, atol=1e-6)
    assert str(gpu_defense.privacy_spent()) == str(_afe(**params).privacy_spent())


def test_dp_sgd_step_on_gpu_matches_cpu():
    pytest.importorskip("dp_accounting")
    from vflsec.splitnn.defenses import BatchInfo, DefenseContext
    from vflsec.splitnn.defenses.dp_sgd import DPSGD

    def step(device):
        torch.manual_seed(0)
        module = torch.nn.Linear(5, 3).double().to(device)
        optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
        d = DPSGD(epsilon=2.0, delta=1e-3, clip_norm=1.0, seed=7)
        d.setup(DefenseContext(n_classes=2, passive_parties=("p",), n_samples=32, batch_size=8, epochs=1))
        x = torch.from_numpy(np.random.default_rng(1).standard_normal((8, 5))).to(device)
        g = torch.from_numpy(np.random.default_rng(2).standard_normal((8, 3))).to(device)
        assert d.bottom_backward("p", module, optimizer, x, module, g, BatchInfo(0, 0, 0, np.arange(8)))
        return [p.detach().cpu().numpy() for p in module.parameters()], d.privacy_spent()

    gpu, spent_gpu = step(DEV)
    cpu, spent_cpu = step("cpu")
    for a, b in zip(gpu, cpu):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    assert spent_gpu.epsilon == spent_cpu.epsilon
