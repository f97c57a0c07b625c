"""Compile-only check of the CUDA module (no GPU needed): runs .ci/compile-cuda,
which builds vflsec with VFLSEC_CUDA=ON into a throwaway environment and
checks that vflsec._core_cuda imports without a driver. Slow (a full build),
so it runs only with VFLSEC_TEST_CUDA_BUILD=1 and nvcc available."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]  # tests/kernels/ -> the checkout


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("VFLSEC_TEST_CUDA_BUILD") != "1", reason="set VFLSEC_TEST_CUDA_BUILD=1 to run")
@pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("CUDACXX"), reason="no nvcc on PATH")
def test_cuda_module_compiles_and_imports():
    result = subprocess.run([str(REPO / ".ci" / "compile-cuda")], cwd=REPO, capture_output=True, text=True,
                            timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "vflsec._core_cuda imports" in result.stdout
