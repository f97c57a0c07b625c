"""Job kind "splitnn": a split-learning job (:mod:`vflsec.splitnn`) under ``vflsec party``.

``[job]`` (with ``kind = "splitnn"``) holds the public
:class:`~vflsec.splitnn.job.SplitJob` fields (``task``, ``n_classes``,
``epochs``, ``batch_size``, ``lr``, ``optimizer``, ``seed``, ``active``,
``passives``, ``active_features``, ``device``) and the models every party
builds for itself:

* ``bottom_hidden`` (list of widths, default ``[64]``) and ``embedding_dim``
  (default 32): each bottom is ``mlp_bottom(features, bottom_hidden,
  embedding_dim)``;
* ``head_hidden`` (default ``[]``): the active party's head on the
  concatenated embeddings, a linear layer or ``mlp_head`` with these widths;
* an optional ``[job.defense]`` table: ``name`` is a defense's name in
  :mod:`vflsec.splitnn.defenses.registry` (e.g. ``"noise_embedding"``,
  ``"vfl_afe"``, ``"dp_sgd"``), the other keys are its keyword arguments
  (``name = "none"`` by default).
  Every party builds and sets up its own copy, as the in-process estimator
  gives each party a copy of one set-up defense.

Model initialisation is seeded per party from ``(seed, position of the party
in job.parties)`` (:func:`build_party_data`), so a party's models do not
depend on any other party's, and the in-process runner given the same
builder trains the same weights. Classification labels in the active party's
CSV are the class indices ``0 .. n_classes - 1``.

Every party checkpoints its modules and optimizer state after each epoch
(:mod:`vflsec.splitnn.training_state`); ``--resume`` continues from them
when the defense allows it: a defense with state of its own (noise
generators, privacy accounting, adapted parameters) declares a
``resume_refusal`` and the run must start again. A party's output JSON has
the history, bytes sent per epoch and the defense's privacy spent; its
trained modules go to ``<output stem>.modules.npz`` (``bottom.<param>``,
``head.<param>``).

Held-out evaluation (``evaluate = true``): each passive party sends the
active party the embeddings of the aligned held-out rows as it would release
them at prediction time (its bottom in eval mode, then its defense's
``transform_embedding``, as the estimator's explicit opt-in ``inference="defended"``
does; the estimator's default, ``"raw"``, releases the embeddings without the defense);
tag ``eval_embedding``: float32, the held-out rows by the sender's embedding
width, finite, or refused naming the sender); the active party runs its own bottom and head and
scores the output: accuracy beside the majority rate (classification), R^2
(regression).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, FrozenSet, Mapping, Optional, Set

import numpy as np

from .._arrays import check_positive_int
from .._torch import require_torch
from ..federation.private_files import private_open
from ..splitnn import defenses as _defenses  # noqa: F401  (registers the built-in defenses)
from ..splitnn.defenses.base import Defense, DefenseContext
from ..splitnn.defenses.registry import get_defense
from ..splitnn.job import TAG_EMBEDDING, TAG_GRADIENT, SplitJob, SplitPartyData, SplitPartyResult
from ..splitnn.models import linear_head, mlp_bottom, mlp_head
from ..splitnn.trainer import PROGRAMS, embedding_widths
from ..splitnn.training_state import training_state
from ..vfl.received import check_received_array
from .deadlines import PHASE_EVALUATION
from .kinds import JobKind, register_job_kind

__all__ = ["MODEL_FIELDS", "TAG_EVAL_EMBEDDING", "SplitJobKind", "build_party_data", "make_defense", "module_arrays"]

TAG_EVAL_EMBEDDING = "eval_embedding"

# [job] keys describing the models, with their defaults.
MODEL_FIELDS: Dict[str, Any] = {"bottom_hidden": [64], "embedding_dim": 32, "head_hidden": []}


def _widths(value: Any, name: str):
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"[job] {name} must be a list of positive ints, got {value!r}")
    return tuple(check_positive_int(w, f"{name}[{i}]") for i, w in enumerate(value))


def make_defense(table: Optional[Mapping[str, Any]]) -> Defense:
    """The defense a ``[job.defense]`` table describes, its settings checked
    (not yet set up)."""
    table = dict(table or {"name": "none"})
    name = table.pop("name", None)
    try:
        cls = get_defense(name)
    except ValueError as exc:
        raise ValueError(f"[job.defense] name: {exc}") from None
    try:
        defense = cls(**table)
        check = getattr(defense, "check_params", None)
        if check is not None:
            check()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"[job.defense] {name}: {exc}") from None
    return defense


def _model_seed(seed: int, position: int) -> int:
    return int(np.random.SeedSequence([int(seed), int(position)]).generate_state(1)[0])


def build_party_data(job: SplitJob, fields: Mapping[str, Any], party: str, X: Optional[np.ndarray],
                     y: Optional[np.ndarray], checkpoint: Any = None) -> SplitPartyData:
    """``party``'s models, defense copy and data for ``job`` -- what its
    process builds in ``vflsec party`` (and what an in-process reference run
    must build to train the same weights)."""
    torch = require_torch("split learning")
    settings = {**MODEL_FIELDS, **{k: v for k, v in fields.items() if k in MODEL_FIELDS}}
    hidden = _widths(settings["bottom_hidden"], "bottom_hidden")
    head_hidden = _widths(settings["head_hidden"], "head_hidden")
    width = check_positive_int(settings["embedding_dim"], "embedding_dim")
    classification = job.task == "classification"
    n_outputs = int(job.n_classes) if classification and job.n_classes is not None else 1
    defense = make_defense(fields.get("defense"))
    defense.setup(DefenseContext(
        n_classes=job.n_classes if classification else None, passive_parties=job.passives,
        n_samples=job.n_samples, batch_size=job.batch_size, epochs=job.epochs, device=job.device, seed=None,
        extra={"model_seed": int(job.seed), "embedding_dims": {p: width for p in job.passives}}))
    role = job.role_of(party)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_model_seed(job.seed, job.parties.index(party)))
        if role == "passive":
            if X is None or X.shape[1] == 0:
                raise ValueError(f"passive party {party!r} has no feature columns")
            bottom = mlp_bottom(X.shape[1], hidden, width)
            return SplitPartyData(X=np.asarray(X, dtype=np.float32), bottom=bottom, defense=defense,
                                  checkpoint=checkpoint)
        if y is None:
            raise ValueError(f"the active party {party!r} has no labels")
        if classification:
            if not np.all(np.isin(y, np.arange(n_outputs))):
                raise ValueError(f"labels of a classification job must be the class indices 0..{n_outputs - 1}")
            labels = np.asarray(y, dtype=np.int64)
        else:
            labels = np.asarray(y, dtype=np.float32)
        own_bottom = own_X = None
        if job.active_features:
            if X is None or X.shape[1] == 0:
                raise ValueError(f"the job has active_features = true but party {party!r} has no feature columns")
            own_X = np.asarray(X, dtype=np.float32)
            own_bottom = mlp_bottom(own_X.shape[1], hidden, width)
        in_features = width * (len(job.passives) + (1 if job.active_features else 0))
        head = mlp_head(in_features, n_outputs, hidden=head_hidden) if head_hidden else linear_head(in_features,
                                                                                                    n_outputs)
        return SplitPartyData(X=own_X, bottom=own_bottom, defense=defense, y=labels, head=head,
                              checkpoint=checkpoint)


def module_arrays(result: SplitPartyResult) -> Dict[str, np.ndarray]:
    """``{"bottom.<param>" / "head.<param>": array}`` of a party's trained modules."""
    return training_state({"bottom": result.bottom, "head": result.head})


def _privacy_spent(result: SplitPartyResult) -> Any:
    """The defense's privacy spent as this party's copy reports it. Every party
    sets up the same defense, so the active party's copy knows a per-release
    calibration (VFL-AFE) too; a defense that counts the releases where they
    happen (DP-SGD, in the passive parties' backward passes) has released
    nothing in the active party's copy: None there (see the passives' outputs)."""
    try:
        spent = result.defense.privacy_spent()
    except RuntimeError:  # e.g. a per-width calibration that was never set up
        return None
    if spent is not None and result.role != "passive" and getattr(spent, "releases", 1) == 0:
        return None
    return spent


class SplitJobKind(JobKind[SplitJob]):
    name = "splitnn"
    default_row_norm = "none"
    writes_checkpoints = True

    def job_fields(self) -> Set[str]:
        job = {f.name for f in dataclasses.fields(SplitJob)} - {"n_samples", "start_epoch"}
        return job | set(MODEL_FIELDS) | {"defense"}

    def make_job(self, fields: Mapping[str, Any], n_samples: int, start_epoch: int = 0) -> SplitJob:
        names = {f.name for f in dataclasses.fields(SplitJob)}
        kwargs = {k: v for k, v in fields.items() if k in names}
        if isinstance(kwargs.get("passives"), list):  # TOML's array; anything else is the job's to refuse
            kwargs["passives"] = tuple(kwargs["passives"])
        job = SplitJob(n_samples=n_samples, start_epoch=start_epoch, **kwargs)
        make_defense(fields.get("defense"))  # a bad [job.defense] fails before any connection
        for key in ("bottom_hidden", "head_hidden"):
            _widths(fields.get(key, MODEL_FIELDS[key]), key)
        check_positive_int(fields.get("embedding_dim", MODEL_FIELDS["embedding_dim"]), "embedding_dim")
        return job

    def check_job(self, job: SplitJob, fields: Mapping[str, Any]) -> None:
        from ..splitnn.estimator import resolve_device

        resolve_device(job.device)  # a device this machine has

    def check_party(self, job: SplitJob, fields: Mapping[str, Any], party: str, X: Optional[np.ndarray],
                    y: Optional[np.ndarray]) -> None:
        # Everything the party's program is given is built and checked the same way (models, labels, defense set-up).
        build_party_data(job, fields, party, X, y)

    def resume_refusal(self, job: SplitJob, fields: Mapping[str, Any]) -> Optional[str]:
        defense = make_defense(fields.get("defense"))
        reason = getattr(defense, "resume_refusal", None)
        if reason is None:
            return None
        name = dict(fields.get("defense") or {}).get("name", "none")
        return f"defense {name!r} cannot resume: {reason}; start the job again"

    def features_optional(self, job: SplitJob, role: str) -> bool:
        return role == "active" and not job.active_features

    def party_data(self, job: SplitJob, fields: Mapping[str, Any], party: str, X: Optional[np.ndarray],
                   y: Optional[np.ndarray], checkpoint: Any) -> SplitPartyData:
        return build_party_data(job, fields, party, X, y, checkpoint)

    def receive_tags(self, job: SplitJob) -> Optional[FrozenSet[str]]:
        return frozenset({TAG_EMBEDDING, TAG_GRADIENT})

    def default_step_timeout(self, job: SplitJob) -> float:
        # A peer's forward and backward pass over a batch, or an epoch-end evaluation.
        return 600.0

    def program(self, job: SplitJob, role: str):
        return PROGRAMS[role]

    def summary(self, job: SplitJob, result: SplitPartyResult, output: Optional[Path],
                data: Any = None) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "bytes_sent_per_epoch": [dict(d) for d in result.bytes_sent],
            "defense": repr(result.defense),
        }
        spent = _privacy_spent(result)
        out["privacy_spent"] = None if spent is None else str(spent)
        if output is not None:
            path = output.with_name(output.stem + ".modules.npz")
            path.parent.mkdir(parents=True, exist_ok=True)
            arrays: Dict[str, Any] = module_arrays(result)
            with private_open(path) as fh:  # trained weights: 0600, atomic, never through a symlink
                np.savez(fh, **arrays)
            out["modules_file"] = path.name
        return out


    def evaluation_tags(self, job: SplitJob) -> FrozenSet[str]:
        return frozenset({TAG_EVAL_EMBEDDING})

    def evaluate(self, channel: Any, job: SplitJob, role: str, result: SplitPartyResult, X: Optional[np.ndarray],
                 y: Optional[np.ndarray], data: Any = None) -> Optional[Dict[str, Any]]:
        torch = require_torch("split learning")
        device = torch.device(job.device)
        if role == "passive":
            if X is None:
                return None
            h = _embed(torch, result.bottom, X, job, device, defense=result.defense, party=result.party)
            channel.send(job.active, TAG_EVAL_EMBEDDING, np.ascontiguousarray(h.cpu().numpy(), dtype=np.float32))
            return None
        if role != "active":
            return None
        if y is None:
            raise ValueError("the active party has no held-out labels")
        n = len(y)
        parts = []
        widths = embedding_widths(job, result.defense)
        for party in job.passives:
            arr = check_received_array(channel.recv(party, TAG_EVAL_EMBEDDING), receiver=channel.name, sender=party,
                                       tag=TAG_EVAL_EMBEDDING, step=PHASE_EVALUATION, dtype=np.float32,
                                       shape=(n, widths[party]), what="held-out embeddings")
            parts.append(torch.from_numpy(arr).to(device))
        if result.bottom is not None:  # the active party's own bottom comes last, as in training
            if X is None:
                raise ValueError("the job has active_features = true but the active party has no held-out features")
            parts.append(_embed(torch, result.bottom, X, job, device))
        head = result.head
        was_training = head.training
        head.eval()
        with torch.no_grad():
            out = head(torch.cat(parts, dim=1)).cpu()
        head.train(was_training)
        y = np.asarray(y)
        if job.task == "classification":
            counts = np.bincount(y.astype(np.int64))
            return {"metric": "accuracy", "value": float(np.mean(out.argmax(dim=1).numpy() == y)), "n": int(n),
                    "baseline": float(counts.max() / n), "baseline_name": "majority rate"}
        predicted = out.reshape(-1).numpy().astype(np.float64)
        total = float(np.sum((y - y.mean()) ** 2))
        r2 = 1.0 - float(np.sum((y - predicted) ** 2)) / total if total > 0 else None  # constant labels: undefined
        return {"metric": "R^2", "value": r2, "n": int(n), "baseline": 0.0,
                "baseline_name": "R^2 of predicting the held-out mean"}


def _embed(torch: Any, module: Any, X: np.ndarray, job: SplitJob, device: Any, *, defense: Any = None,
           party: str = "") -> Any:
    """``module``'s output on the rows ``X`` in eval mode, per batch of the job's
    size; with ``defense``, what ``party`` would release (its transform_embedding)."""
    from ..splitnn.defenses.base import BatchInfo

    was_training = module.training
    module.eval()
    out = []
    with torch.no_grad():
        for step, start in enumerate(range(0, X.shape[0], job.batch_size)):
            idx = np.arange(start, min(X.shape[0], start + job.batch_size), dtype=np.int64)
            h = module(torch.from_numpy(np.asarray(X[idx], dtype=np.float32)).to(device))
            if defense is not None:
                h = defense.transform_embedding(party, h, BatchInfo(epoch=job.epochs, step=step, global_step=-1,
                                                                    indices=idx))
            out.append(h.detach().float())
    module.train(was_training)
    return torch.cat(out, dim=0)


register_job_kind(SplitJobKind(), replace=True)
