"""Package-level behaviour: version, thread control, CPU dispatch info, CLI."""
import os
import subprocess
import sys

import pytest

import vflsec


def test_version_matches_metadata():
    from importlib.metadata import version

    assert vflsec.__version__ == version("vflsec")
    assert vflsec._core.__version__ == vflsec.__version__


def test_set_get_num_threads_roundtrip():
    before = vflsec.get_num_threads()
    try:
        vflsec.set_num_threads(1)
        assert vflsec.get_num_threads() == 1
        vflsec.set_num_threads(3)
        assert vflsec.get_num_threads() == 3
    finally:
        vflsec.set_num_threads(before)


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError),
                                      ("2", TypeError)])
def test_set_num_threads_rejects_bad_values(bad, exc):
    with pytest.raises(exc, match="n"):
        vflsec.set_num_threads(bad)


@pytest.mark.slow  # a python subprocess
def test_omp_num_threads_is_honoured():
    code = "import vflsec; print(vflsec.get_num_threads())"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"


def test_cpu_features_reports_dispatch_flags():
    feats = vflsec.cpu_features()
    assert set(feats) >= {"avx2", "avx512f", "fma"}
    assert all(isinstance(v, bool) for v in feats.values())


@pytest.mark.slow  # vflsec subprocesses
def test_cli_version_and_help():
    out = subprocess.run([sys.executable, "-m", "vflsec", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == vflsec.__version__
    out = subprocess.run([sys.executable, "-m", "vflsec", "bench", "--help"], capture_output=True, text=True,
                         check=True)
    assert "kernels" in out.stdout


@pytest.mark.slow  # a vflsec subprocess
def test_cli_rejects_unknown_benchmark():
    out = subprocess.run([sys.executable, "-m", "vflsec", "bench", "nonsense"], capture_output=True, text=True)
    assert out.returncode != 0
    assert "invalid choice" in out.stderr
