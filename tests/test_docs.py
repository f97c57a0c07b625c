"""The API reference builds from the docstrings in strict mode (a broken
cross-reference, a missing page or an unparsable docstring fails the build)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings_handlers.python")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # builds the docs in a subprocess
def test_api_reference_builds_strictly(tmp_path):
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    page = (tmp_path / "api" / "kernels" / "index.html").read_text()
    assert "add_gaussian_noise" in page and "The Gaussian mechanism" in page
    for module in ("dp", "he", "glm", "splitnn", "attacks", "data", "vfl", "federation", "runtime"):
        assert (tmp_path / "api" / module / "index.html").stat().st_size > 10_000, module
    # Every public estimator and its fit (vflsec.glm imports its estimator lazily, so the
    # package page alone does not show it).
    glm = (tmp_path / "api" / "glm" / "index.html").read_text()
    for name in ("estimator.VerticalLogisticRegression", "central_dp.CentralDPLogisticRegression"):
        for member in ("", ".fit", ".save", ".load"):
            assert f'id="vflsec.glm.{name}{member}"' in glm, name + member
    splitnn = (tmp_path / "api" / "splitnn" / "index.html").read_text()
    for name in ("SplitNNClassifier", "SplitNNRegressor"):
        for member in ("", ".fit", ".predict", ".save", ".load"):
            assert f'id="vflsec.splitnn.estimator.{name}{member}"' in splitnn, name + member
    # The "your own data" guide is a page of the site.
    assert "predict.toml" in (tmp_path / "own-data" / "index.html").read_text()
