"""Held-out accuracy of the 3-party example job (job.toml) after a run.

`vflsec party-data` writes only the training rows of its split; the same
`--dataset`, `--parties` and `--seed` give the same split here, so the parties'
trained weights (examples/out/<party>.json) are scored on the split's test rows,
each party's block prepared as `party-data` and `row_norm = "clip"` prepare it.

    python examples/evaluate.py --dataset breast --parties 10,10,10
    python examples/evaluate.py --dataset adult --parties 6,4,4 --data-dir /path/to/adult
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from vflsec.data import load_dataset, vertical_split
from vflsec.dp.sensitivity import clip_row_norms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--dataset", default="breast", help="breast (default) or adult, as given to party-data")
    parser.add_argument("--parties", default="10,10,10", help="attributes per party, as given to party-data")
    parser.add_argument("--names", default="active,passive1,passive2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=None, help="Adult's folder (default: $VFLSEC_DATA)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"), help="the parties' outputs")
    args = parser.parse_args()

    counts = [int(c) for c in args.parties.split(",")]
    if args.dataset not in ("breast", "adult"):
        parser.error("--dataset must be breast or adult")
    kw = {"data_dir": args.data_dir} if args.dataset == "adult" else {}
    split = vertical_split(load_dataset(args.dataset, **kw), counts, seed=args.seed)
    score = sum(clip_row_norms(split.X_test[p]) @ np.asarray(json.load(open(Path(args.out) / f"{name}.json"))["coef"])
                for p, name in enumerate(args.names.split(",")))
    y_test = np.asarray(split.y_test) > 0
    active = json.load(open(Path(args.out) / f"{args.names.split(',')[0]}.json"))
    majority = max(y_test.mean(), 1 - y_test.mean())
    print(f"held-out accuracy {np.mean((score > 0) == y_test):.3f} on {len(y_test)} test rows "
          f"(majority rate {majority:.3f}); training accuracy {active['history']['accuracy'][-1]:.3f} "
          f"on {active['n_samples']} aligned rows")


if __name__ == "__main__":
    main()
