"""Held-out accuracy of the split-learning example job (job-splitnn.toml) after a run.

`vflsec party-data` writes only the training rows of its split; the same
`--dataset`, `--parties` and `--seed` give the same split here. Each party's
trained modules (examples/out/<party>.modules.npz) are loaded into the models
the job file describes (each passive bottom wrapped by its defense as in
training) and the split's test rows are scored: every passive party's
embedding as it would release it (`--inference defended`, the default: its
defense's transform, noise included) or its bottom's raw output
(`--inference raw`), the active party's own bottom (when the job has
`active_features`) and head.

    python examples/evaluate_splitnn.py --dataset breast --parties 10,10,10
    python examples/evaluate_splitnn.py --dataset adult --parties 6,4,4 --data-dir /path/to/adult
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from vflsec.data import load_dataset, vertical_split

HERE = Path(__file__).resolve().parent


def held_out_accuracy(job_file, out_dir, names, X_test, y_test, inference="defended"):
    """Accuracy of the trained split model on ``X_test`` (one block per party, in ``names`` order)."""
    import torch

    from vflsec.runtime.job_spec import load_job_spec
    from vflsec.runtime.splitnn_kind import build_party_data
    from vflsec.splitnn.defenses.base import BatchInfo
    from vflsec.splitnn.training_state import restore_training_state

    spec = load_job_spec(job_file)
    outputs = {name: json.loads((Path(out_dir) / f"{name}.json").read_text()) for name in names}
    job = spec.job(n_samples=outputs[names[0]]["n_samples"])
    job = dataclasses.replace(job, device="cpu")
    n = X_test[0].shape[0]
    parts = []
    head = None
    with torch.no_grad():
        for name, X in zip(names, X_test):
            role = job.role_of(name)
            X = np.asarray(X, dtype=np.float32)
            y = np.zeros(n, dtype=np.int64) if role == "active" else None
            data = build_party_data(job, spec.fields, name, X if role == "passive" or job.active_features else None, y)
            bottom = data.defense.wrap_bottom(name, data.bottom) if role == "passive" else data.bottom
            modules = {"bottom": bottom, "head": data.defense.wrap_head(data.head) if role == "active" else None}
            with np.load(Path(out_dir) / f"{name}.modules.npz", allow_pickle=False) as saved:
                restore_training_state(dict(saved), modules)
            for module in modules.values():
                if module is not None:
                    module.eval()
            if role == "active":
                head = modules["head"]
            if bottom is None:
                continue
            h = bottom(torch.from_numpy(X))
            if role == "passive" and inference == "defended":
                h = data.defense.transform_embedding(name, h, BatchInfo(epoch=job.epochs, step=0, global_step=-1,
                                                                        indices=np.arange(n, dtype=np.int64)))
            parts.append((job.passives.index(name) if role == "passive" else len(job.passives), h))
        # The trainer's order: the passive parties' embeddings (job order), then the active party's own.
        logits = head(torch.cat([h for _, h in sorted(parts, key=lambda p: p[0])], dim=1))
    predicted = logits.argmax(dim=1).numpy()
    return float(np.mean(predicted == np.asarray(y_test))), outputs[names[0]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--dataset", default="breast", help="breast (default) or adult, as given to party-data")
    parser.add_argument("--parties", default="10,10,10", help="attributes per party, as given to party-data")
    parser.add_argument("--names", default="active,passive1,passive2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=None, help="Adult's folder (default: $VFLSEC_DATA)")
    parser.add_argument("--job", default=str(HERE / "job-splitnn.toml"), help="the job file the parties ran")
    parser.add_argument("--out", default=str(HERE / "out"), help="the parties' outputs")
    parser.add_argument("--inference", choices=("defended", "raw"), default="defended")
    args = parser.parse_args()

    counts = [int(c) for c in args.parties.split(",")]
    if args.dataset not in ("breast", "adult"):
        parser.error("--dataset must be breast or adult")
    kw = {"data_dir": args.data_dir} if args.dataset == "adult" else {}
    split = vertical_split(load_dataset(args.dataset, **kw), counts, seed=args.seed)
    y_test = (np.asarray(split.y_test) > 0).astype(np.int64)
    accuracy, active = held_out_accuracy(args.job, args.out, args.names.split(","), split.X_test, y_test,
                                         args.inference)
    majority = max(y_test.mean(), 1 - y_test.mean())
    print(f"held-out accuracy {accuracy:.3f} on {len(y_test)} test rows ({args.inference} embeddings; "
          f"majority rate {majority:.3f}); training accuracy {active['history']['accuracy'][-1]:.3f} "
          f"on {active['n_samples']} aligned rows")


if __name__ == "__main__":
    main()
