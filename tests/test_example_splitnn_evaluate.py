"""examples/evaluate_splitnn.py: the split-learning example job's held-out
score from the parties' outputs (<name>.json and <name>.modules.npz, as
`vflsec party` writes them), here from an in-process run of the example job
file on the rows `vflsec party-data --dataset breast --parties 10,10,10` writes."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vflsec.data import load_dataset, vertical_split  # noqa: E402
from vflsec.runtime.job_spec import load_job_spec  # noqa: E402
from vflsec.runtime.splitnn_kind import build_party_data, module_arrays  # noqa: E402
from vflsec.splitnn.trainer import run_split_job  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
JOB_FILE = ROOT / "examples" / "job-splitnn.toml"
NAMES = ("active", "passive1", "passive2")


@pytest.mark.slow  # a python subprocess (the example script) after a training run
def test_example_splitnn_held_out_score(tmp_path):
    torch.set_num_threads(1)
    split = vertical_split(load_dataset("breast"), [10, 10, 10], seed=0)
    spec = load_job_spec(JOB_FILE)
    n = split.X_train[0].shape[0]
    job = spec.job(n_samples=n)
    y = (np.asarray(split.y_train) > 0).astype(np.int64)
    data = {name: build_party_data(job, spec.fields, name, split.X_train[i], y if name == "active" else None)
            for i, name in enumerate(NAMES)}
    result = run_split_job(job, data)
    for name in NAMES:
        r = result.results[name]
        np.savez(tmp_path / f"{name}.modules.npz", **module_arrays(r))
        (tmp_path / f"{name}.json").write_text(json.dumps({"n_samples": n, "history": r.history}))
    for inference in ("defended", "raw"):
        out = subprocess.run([sys.executable, str(ROOT / "examples" / "evaluate_splitnn.py"), "--out", str(tmp_path),
                              "--inference", inference], check=True, capture_output=True, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout
        found = re.search(r"held-out accuracy ([\d.]+) on 114 test rows \(" + inference
                          + r" embeddings; majority rate ([\d.]+)\)", out)
        assert found, out
        held_out, majority = map(float, found.groups())
        assert held_out >= majority + 0.15, out
