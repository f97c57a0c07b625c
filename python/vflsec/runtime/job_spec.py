"""The job description file (``job.toml``) every party of a run holds.

One ``[job]`` table: ``kind`` ("glm", the default, "splitnn", "trees" or "predict";
see :mod:`.kinds`), the public fields of that kind's job (for "glm" the
:class:`~vflsec.glm.job.GLMJob` fields ``protocol``, ``loss``, ``lr``,
``epochs``, ``batch_size``, ``seed``, ``active``, ``passives``,
``coordinator``, ... with an optional ``[job.options]`` table, and the
model's design ``fit_intercept`` (default true) and ``intercept_scaling``
(default 0.5), see :mod:`.glm_kind`; for "splitnn" see
:mod:`.splitnn_kind`, for "trees" :mod:`.trees_kind`), never ``n_samples`` or
``start_epoch`` (the alignment and ``--resume`` give them), and ``row_norm``:
"clip" (each party maps its rows to ``x / max(1, ||x||)``; the GLM default) or
"none" (the split-learning and trees default).

``evaluate = true`` (default false) adds a held-out evaluation after
training: every data party names a CSV of held-out rows in its party
configuration (``[party] test_data``, the columns of its training CSV), the
parties align those rows by PSI as the training rows, and the active party
scores the trained model on them (the job kind's
:meth:`~vflsec.runtime.kinds.JobKind.evaluate`) and prints the score in its
final summary. As prediction with a vertical model does, this shows the
active party each passive party's contribution for the held-out rows (a
GLM's partial scores ``x_p . w_p``, a split model's released embeddings);
the job file says so to every party, which agrees to it by its digest.

The parties compare the SHA-256 of the canonical JSON of this description
(:attr:`JobSpec.digest`) before anything else. A GLM job's digest leaves the
kind out, so ``kind = "glm"`` written or not, and job files from before job
kinds existed, give the same digest. A GLM job's ``widths`` (every data
party's number of feature columns in its CSV; the job's block widths add the
active party's intercept column) need not be written: each party announces
its own in the handshake and every party agrees on the map there
(:func:`.handshake.agree_on_job`); a ``[job.widths]`` table pins them, and a
party whose data differs stops the job before training.

When the digests differ, the parties also compare a digest per key
(:meth:`JobSpec.key_digests`: the SHA-256 of each key's name and value, a
sub-table's keys one by one), so each can name the keys that differ; no value
crosses the network in the clear (a job file is shared configuration, not a
secret, but the hashes are all the comparison needs).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple

from ..vfl.job import VFLJob
from .config import read_toml
from .job_overrides import JobOverride, apply_job_overrides
from .kinds import DEFAULT_KIND, JobKind, get_job_kind

__all__ = ["JobSpec", "load_job_spec"]

ROW_NORMS = ("clip", "none")
_FORBIDDEN_JOB_FIELDS = ("n_samples", "start_epoch")


@dataclass(frozen=True)
class JobSpec:
    """The agreed job description: the kind's fields (without ``n_samples``)
    and the runner settings ``row_norm`` and ``evaluate``; ``digest`` is the SHA-256 of its
    canonical JSON."""

    kind: JobKind[Any]
    fields: Mapping[str, Any]
    row_norm: str
    digest: str
    evaluate: bool = False
    source: Optional[Path] = field(default=None, compare=False)  # the job file it was read from

    def keyed(self) -> Dict[str, Any]:
        """Every key of the job as the parties agree on it, ``key -> value``: ``kind``,
        ``row_norm`` and ``evaluate`` as they apply (written or not), the kind's fields, a
        sub-table's keys as ``table.key``."""
        return {"kind": self.kind.name, "row_norm": self.row_norm, "evaluate": self.evaluate,
                **dict(_flat(self.fields))}

    def key_digests(self) -> Dict[str, str]:
        """``key -> SHA-256`` of the key's name and value (:meth:`keyed`): what the job
        agreement compares to name the keys that differ, no value in the clear."""
        return {key: hashlib.sha256(json.dumps([key, value], sort_keys=True, separators=(",", ":"),
                                               default=str).encode("utf-8")).hexdigest()
                for key, value in self.keyed().items()}

    def job(self, n_samples: int, start_epoch: int = 0, widths: Optional[Mapping[str, int]] = None) -> VFLJob:
        """The job for the aligned rows; ``widths``: the block widths agreed in
        the handshake (:func:`.handshake.agree_on_job`), for a kind whose job
        has them."""
        fields = self.fields if widths is None else {**self.fields, "widths": dict(widths)}
        return self.kind.make_job(fields, n_samples, start_epoch)

    def probe_job(self) -> VFLJob:
        """The job with a placeholder row count (for its parties and roles
        before the alignment)."""
        size = self.fields.get("batch_size", 64)
        # A batch_size that is not an int >= 1 is left for the job's own check to name.
        fits = isinstance(size, int) and not isinstance(size, bool) and size >= 1
        return self.job(n_samples=size if fits else 1)

    @property
    def parties(self) -> Tuple[str, ...]:
        return self.probe_job().parties


def _flat(table: Mapping[str, Any], prefix: str = "") -> Iterator[Tuple[str, Any]]:
    for key, value in table.items():
        if isinstance(value, Mapping):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def load_job_spec(path: Path, overrides: Sequence[JobOverride] = ()) -> JobSpec:
    """The job file's description; ``overrides`` (``--job KEY=VALUE``, :mod:`.job_overrides`) are applied
    to its ``[job]`` table first, so the checks and the digest are of the job with them."""
    raw = read_toml(Path(path))
    if set(raw) - {"job"} or not isinstance(raw.get("job"), dict):
        raise ValueError(f"{path}: a job file holds exactly one [job] table")
    table = apply_job_overrides(raw["job"], overrides)
    for name in _FORBIDDEN_JOB_FIELDS:
        if name in table:
            raise ValueError(f"{path}: [job] must not set {name!r} (it comes from the entity alignment / --resume)")
    kind_name = table.pop("kind", DEFAULT_KIND)
    try:
        kind = get_job_kind(kind_name)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    row_norm = table.pop("row_norm", kind.default_row_norm)
    if row_norm not in ROW_NORMS:
        raise ValueError(f"{path}: row_norm must be 'clip' or 'none', got {row_norm!r}")
    evaluate = table.pop("evaluate", False)
    if not isinstance(evaluate, bool):
        raise ValueError(f"{path}: evaluate must be true or false, got {evaluate!r}")
    unknown = set(table) - kind.job_fields()
    if unknown:
        raise ValueError(f"{path}: unknown [job] fields {sorted(unknown)}")
    described: Dict[str, Any] = {"job": table, "row_norm": row_norm}
    if evaluate:  # left out when false: job files from before the key give the same digest
        described["evaluate"] = True
    if kind.name != DEFAULT_KIND:
        described["kind"] = kind.name
    canonical = json.dumps(described, sort_keys=True, separators=(",", ":"))
    spec = JobSpec(kind, table, row_norm, hashlib.sha256(canonical.encode("utf-8")).hexdigest(), evaluate,
                   Path(path))
    spec.probe_job()  # validate the fields now
    return spec
