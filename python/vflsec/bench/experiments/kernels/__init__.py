"""``vflsec bench kernels``: the C++ kernels against the real alternatives, in one run.

Times pairwise distances, fused distance statistics, fuzzy c-means, Gaussian
noise and the secure DP release (``add_gaussian_noise``) against torch, scipy,
scikit-learn, faiss, scikit-fuzzy, numpy and, where they import, OpenDP and
diffprivlib, with each method's accuracy where it has one; the release's two
targets (issue 13) are claims in ``papers/vflsec_targets.toml``. With
``--device cuda``, the CUDA kernels against torch on the same GPU.

Outputs (``--out DIR``, default ``bench-out/kernels``): ``kernels.json``,
``kernels.md`` and ``kernels.png``; ``kernels-cuda.json``, ``.md`` and ``.png``
with ``--device cuda``.

Modules: :mod:`.grid` (the grids of ``kernels.toml`` and the experiment),
:mod:`.cells` (the CPU cells), :mod:`.cuda` (the GPU cells), :mod:`.analysis`
(speed-ups and the release's targets, from rows), :mod:`.report` (markdown and plot).
"""
from .grid import EXPERIMENT

__all__ = ["EXPERIMENT"]
