"""Held-out accuracy of the 3-party example job (job.toml) after a run.

The same `--dataset`, `--parties` and `--seed` as `vflsec party-data` give the
same split here, so the parties' trained models (examples/out/<party>.json:
each party's feature weights, the active party's intercept) are scored on the
split's test rows, each party's block prepared as the job prepares it (the
model's design, `vflsec.glm.model`, from job.toml: `row_norm`, the intercept).
With `evaluate = true` the active party prints this number at the end of its run.

    python examples/evaluate.py --dataset breast --parties 10,10,10
    python examples/evaluate.py --dataset adult --parties 6,4,4 --data-dir /path/to/adult
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from vflsec.data import load_dataset, vertical_split
from vflsec.runtime.glm_kind import glm_design
from vflsec.runtime.job_spec import load_job_spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--dataset", default="breast", help="breast (default) or adult, as given to party-data")
    parser.add_argument("--parties", default="10,10,10", help="attributes per party, as given to party-data")
    parser.add_argument("--names", default="active,passive1,passive2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=None, help="Adult's folder (default: $VFLSEC_DATA)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"), help="the parties' outputs")
    parser.add_argument("--job", default=str(Path(__file__).resolve().parent / "job.toml"), help="the job file")
    args = parser.parse_args()

    counts = [int(c) for c in args.parties.split(",")]
    if args.dataset not in ("breast", "adult"):
        parser.error("--dataset must be breast or adult")
    kw = {"data_dir": args.data_dir} if args.dataset == "adult" else {}
    split = vertical_split(load_dataset(args.dataset, **kw), counts, seed=args.seed)
    spec = load_job_spec(Path(args.job))
    design = glm_design(spec.fields.get("loss", "logistic"), spec.fields, spec.row_norm)
    outputs = [json.loads((Path(args.out) / f"{name}.json").read_text()) for name in args.names.split(",")]
    score = design.decision_function(split.X_test, [out["coef"] for out in outputs], outputs[0]["intercept"])
    y_test = np.asarray(split.y_test) > 0
    active = outputs[0]
    majority = max(y_test.mean(), 1 - y_test.mean())
    print(f"held-out accuracy {np.mean((score > 0) == y_test):.3f} on {len(y_test)} test rows "
          f"(majority rate {majority:.3f}); training accuracy {active['history']['accuracy'][-1]:.3f} "
          f"on {active['n_samples']} aligned rows")


if __name__ == "__main__":
    main()
