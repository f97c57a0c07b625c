"""scikit-learn style split-learning estimators.

``SplitNNClassifier`` / ``SplitNNRegressor`` train a split neural network
over vertically partitioned data: ``fit(X_parts, y)`` takes one feature block
per party (rows aligned). The active party holds the labels and the head; each
passive party trains its own bottom model and sends embeddings.

Party convention (the same as :class:`vflsec.glm.VerticalLogisticRegression`):
the active party's block comes **first**, and the passive parties are named
``passive_0``, ``passive_1``, ... in block order. With
``active_features=True`` ``X_parts[0]`` is the active party's own block (it
then also trains a bottom on it; its embedding is never sent) and
``X_parts[1:]`` belong to ``passive_0``, ``passive_1``, ...; with
``active_features=False`` (default) the active party holds only the labels
and every block is a passive party's (``X_parts[i]`` is ``passive_i``).
``history_`` is a dict of per-epoch lists, as the GLM estimator's.

Each party runs its own program (:mod:`vflsec.splitnn.trainer`) in its own
thread over an in-memory channel. After fitting, the estimator keeps every
party's trained model (``bottoms_``, ``head_``) so that prediction and attack
evaluations can run in-process; in a deployment each party keeps its own.

Prediction is deterministic by default (``inference="raw"``): each passive
party sends its trained bottom's output as it is (a model wrapped by its
defense, e.g. FedPass's passport layers, included), so ``predict`` answers the
same every time. Those test-time embeddings are **not** DP releases: a DP
defense's guarantee covers the training rows' releases. The raw embeddings
also score at least as well as the defended ones: on a synthetic two-party
task, VFL-AFE at epsilon 2 and 20, t 1 and 10, with and without +R/+D,
linear and MLP heads, raw inference scored 0 to 32 points above defended
inference and 0 to 11 above the clipped, noiseless embeddings.
``inference="defended"`` (opt-in) sends what the defense releases in training
(``transform_embedding``, noise included), so ``predict`` is random under a
noisy defense, and a DP defense counts each such prediction pass as one more
release of every row it covers: ``privacy_spent_`` is refreshed after the
pass. ``embed(X_parts, defended=...)`` returns the embeddings themselves,
e.g. for inversion or membership attacks.
"""
from __future__ import annotations

import copy
import numbers
import sys
from typing import Any, Dict, List, Optional, Sequence, cast

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import NotFittedError

from .._arrays import as_float_array, check_positive_int, check_real, is_torch_tensor
from .._progress import EpochProgress
from .._torch import require_torch
from .defenses.base import BatchInfo, Defense, DefenseContext, NoDefense
from .job import OPTIMIZERS, SplitJob, SplitPartyData, SplitPartyResult
from .models import linear_head, mlp_bottom
from .trainer import run_split_job

__all__ = ["SplitNNClassifier", "SplitNNRegressor", "resolve_device"]

INFERENCE_MODES = ("raw", "defended")


def resolve_device(device: Any) -> str:
    """``None``/"auto": CUDA when available, else CPU; otherwise the string given."""
    torch = require_torch("split learning")
    if device is None or device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not isinstance(device, str):
        raise TypeError(f"device must be a str or None, got {type(device).__name__}")
    try:
        torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"invalid device {device!r}: {exc}") from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available")
    index = torch.device(device).index
    if device.startswith("cuda") and index is not None and index >= torch.cuda.device_count():
        raise ValueError(f"device {device!r} requested but this machine has {torch.cuda.device_count()} CUDA "
                         "device(s)")
    return device


def _is_module(obj: Any) -> bool:
    torch = require_torch("split learning")
    return isinstance(obj, torch.nn.Module)


class _SplitNNBase(BaseEstimator):
    _task = "classification"

    def __init__(self, bottoms: Any = None, head: Any = None, defense: Optional[Defense] = None, *,
                 epochs: int = 10, batch_size: int = 64, lr: float = 1e-3, optimizer: str = "adam",
                 seed: int = 0, device: Optional[str] = None, active_features: bool = False,
                 embedding_dim: int = 32, inference: str = "raw", verbose: int = 0):
        self.bottoms = bottoms
        self.head = head
        self.defense = defense
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.optimizer = optimizer
        self.seed = seed
        self.device = device
        self.active_features = active_features
        self.embedding_dim = embedding_dim
        self.inference = inference
        self.verbose = verbose

    # -- validation ------------------------------------------------------------------
    def _check_params(self) -> None:
        check_positive_int(self.epochs, "epochs")
        check_positive_int(self.batch_size, "batch_size")
        check_real(self.lr, "lr", low=0.0, low_inclusive=False)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral) or self.seed < 0:
            raise TypeError(f"seed must be a non-negative int, got {self.seed!r}")
        if not isinstance(self.active_features, bool):
            raise TypeError("active_features must be a bool")
        check_positive_int(self.embedding_dim, "embedding_dim")
        if self.inference not in INFERENCE_MODES:
            raise ValueError(f"inference must be one of {INFERENCE_MODES}, got {self.inference!r}")
        if isinstance(self.verbose, bool) or not isinstance(self.verbose, numbers.Integral):
            raise TypeError(f"verbose must be an int, got {type(self.verbose).__name__}")
        if self.defense is not None and not isinstance(self.defense, Defense):
            raise TypeError(f"defense must be a vflsec.splitnn.defenses.Defense or None, "
                            f"got {type(self.defense).__name__}")

    def _parts(self, X_parts: Any, *, n_expected: Optional[int] = None) -> List[np.ndarray]:
        if isinstance(X_parts, (np.ndarray, str, bytes)) or is_torch_tensor(X_parts) \
                or not isinstance(X_parts, (list, tuple)):
            raise TypeError("X_parts must be a list with one 2-D feature block per party")
        minimum = 2 if self.active_features else 1
        if len(X_parts) < minimum:
            raise ValueError(f"X_parts needs at least {minimum} block(s) (one per passive party"
                             f"{' plus the active party' if self.active_features else ''}), got {len(X_parts)}")
        parts = [as_float_array(x, f"X_parts[{i}]", ndim=2, dtype=np.float32)[0] for i, x in enumerate(X_parts)]
        rows = {p.shape[0] for p in parts}
        if len(rows) != 1:
            raise ValueError(f"every party must hold the same rows; row counts are {[p.shape[0] for p in parts]}")
        if hasattr(self, "n_features_per_party_"):
            if len(parts) != len(self.n_features_per_party_):
                raise ValueError(f"fitted with {len(self.n_features_per_party_)} parties, got {len(parts)} blocks")
            for i, (p, f) in enumerate(zip(parts, self.n_features_per_party_)):
                if p.shape[1] != f:
                    raise ValueError(f"X_parts[{i}] has {p.shape[1]} features, fitted with {f}")
        if n_expected is not None and parts[0].shape[0] != n_expected:
            raise ValueError(f"X_parts have {parts[0].shape[0]} rows but y has {n_expected} entries")
        return self._training_order(parts)

    def _training_order(self, blocks: Sequence[Any]) -> List[Any]:
        """``blocks`` given active first (the public convention) in the order
        the parties are built and their embeddings concatenated: passives,
        then the active party's own block. Building in this order keeps the
        models' initialisation (and so every result) as it always was."""
        blocks = list(blocks)
        return blocks[1:] + blocks[:1] if self.active_features else blocks

    # -- model building ------------------------------------------------------------------
    def _build_bottom(self, i: int, in_features: int):
        spec = self.bottoms
        if isinstance(spec, (list, tuple)):
            if len(spec) != self.n_parts_:
                raise ValueError(f"bottoms has {len(spec)} entries for {self.n_parts_} feature blocks")
            spec = self._training_order(spec)[i]
        if spec is None:
            return mlp_bottom(in_features, (64,), self.embedding_dim)
        if _is_module(spec):
            return copy.deepcopy(spec)
        if callable(spec):
            module = spec(in_features)
            if not _is_module(module):
                raise TypeError(f"bottom factory returned {type(module).__name__}, expected a torch Module")
            return module
        raise TypeError("bottoms must be None, a torch Module, a factory f(in_features) -> Module, "
                        "or a list of those (one per feature block)")

    def _build_head(self, in_features: int, n_outputs: int):
        spec = self.head
        if spec is None:
            return linear_head(in_features, n_outputs)
        if _is_module(spec):
            return copy.deepcopy(spec)
        if callable(spec):
            module = spec(in_features, n_outputs)
            if not _is_module(module):
                raise TypeError(f"head factory returned {type(module).__name__}, expected a torch Module")
            return module
        raise TypeError("head must be None, a torch Module or a factory f(in_features, n_outputs) -> Module")

    @staticmethod
    def _out_width(module, in_features: int) -> int:
        torch = require_torch("split learning")
        was_training = module.training
        module.eval()
        with torch.no_grad():
            out = module(torch.zeros(2, in_features))
        module.train(was_training)
        if out.ndim != 2 or out.shape[0] != 2:
            raise ValueError(f"a bottom model must map (n, {in_features}) to (n, d); got shape {tuple(out.shape)}")
        return int(out.shape[1])

    # -- fit -------------------------------------------------------------------------
    def _targets(self, y: Any) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def fit(self, X_parts: Sequence[Any], y: Any):
        """Train the split model on ``X_parts`` -- one feature block per party, active party first,
        rows aligned (numpy arrays or torch tensors) -- and the active party's labels ``y``; each
        party runs its program in its own thread over an in-memory channel, with the defense's
        hooks on what crosses it. Returns ``self``."""
        self._check_params()
        for attr in ("n_features_per_party_",):
            if hasattr(self, attr):
                delattr(self, attr)
        y_enc = self._targets(y)
        parts = self._parts(X_parts, n_expected=len(y_enc))
        n = parts[0].shape[0]
        if self.batch_size > n:
            raise ValueError(f"batch_size ({self.batch_size}) must not exceed the number of rows ({n})")
        torch = require_torch("split learning")
        device = resolve_device(self.device)
        self.n_parts_ = len(parts)
        n_passive = self.n_parts_ - (1 if self.active_features else 0)
        passives = tuple(f"passive_{i}" for i in range(n_passive))
        active = "active"
        n_outputs = len(self.classes_) if self._task == "classification" else 1
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.seed))
            bottoms = [self._build_bottom(i, p.shape[1]) for i, p in enumerate(parts)]
            widths = [self._out_width(b, p.shape[1]) for b, p in zip(bottoms, parts)]
            head = self._build_head(sum(widths), n_outputs)
        defense = self.defense if self.defense is not None else NoDefense()
        context = DefenseContext(
            n_classes=n_outputs if self._task == "classification" else None, passive_parties=passives,
            n_samples=n, batch_size=int(self.batch_size), epochs=int(self.epochs), device=device, seed=None,
            extra={"model_seed": int(self.seed), "embedding_dims": dict(zip(passives, widths))},
        )
        defense.setup(context)
        job = SplitJob(n_samples=n, task=self._task, n_classes=context.n_classes, epochs=int(self.epochs),
                       batch_size=int(self.batch_size), lr=float(self.lr), optimizer=self.optimizer,
                       seed=int(self.seed), active=active, passives=passives,
                       active_features=self.active_features, device=device)
        data = {p: SplitPartyData(X=parts[i], bottom=bottoms[i], defense=copy.deepcopy(defense))
                for i, p in enumerate(passives)}
        data[active] = SplitPartyData(
            X=parts[-1] if self.active_features else None, bottom=bottoms[-1] if self.active_features else None,
            defense=copy.deepcopy(defense), y=y_enc, head=head)
        if self.verbose >= 1:
            data[active].progress = self._progress(data, passives)
        result = run_split_job(job, data)
        # cast: every split-learning party program returns a SplitPartyResult (JobResult holds the base type).
        results = cast(Dict[str, SplitPartyResult], result.results)
        active_result = results[active]
        self.defense_ = defense
        self.party_defenses_ = {p: r.defense for p, r in results.items()}
        self.bottoms_ = {p: results[p].bottom for p in passives}
        if self.active_features:
            self.bottoms_[active] = active_result.bottom
        self.head_ = active_result.head
        self.passive_parties_ = passives
        self.device_ = device
        self.n_features_per_party_ = [p.shape[1] for p in self._public_order(parts)]
        self.embedding_dims_ = dict(zip(passives, widths))
        self.bytes_by_tag_ = result.bytes_by_tag()
        self.timings_ = {p: r.timings for p, r in results.items()}
        # One list per metric, one entry per epoch (the GLM estimator's shape).
        self.history_: Dict[str, List[Any]] = {key: list(values[:self.epochs])
                                               for key, values in active_result.history.items()}
        self.history_["bytes"] = []
        for e in range(self.epochs):
            sent: Dict[str, int] = {}
            for r in results.values():
                for tag, nbytes in r.bytes_sent[e].items():
                    sent[tag] = sent.get(tag, 0) + nbytes
            self.history_["bytes"].append(sent)
        self.privacy_spent_ = {p: self.party_defenses_[p].privacy_spent() for p in passives}
        return self

    def _progress(self, data: Dict[str, SplitPartyData], passives: Sequence[str]) -> EpochProgress:
        """The active party's per-epoch line printer (``verbose`` >= 1); epsilon is the largest
        any passive party's defense copy reports at that moment (None for a non-DP defense)."""

        def epsilon() -> Dict[str, Any]:
            return {p: data[p].defense.privacy_spent() for p in passives}

        def emit(line: str) -> None:
            print(f"[{type(self).__name__}] {line}", file=sys.stderr, flush=True)

        return EpochProgress(int(self.epochs), emit, epsilon=epsilon)

    # -- inference -------------------------------------------------------------------
    def _public_order(self, blocks: List[Any]) -> List[Any]:
        """Inverse of :meth:`_training_order`: the active party's block first."""
        blocks = list(blocks)
        return blocks[-1:] + blocks[:-1] if self.active_features else blocks

    def _check_fitted(self) -> None:
        if not hasattr(self, "head_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def embed(self, X_parts: Sequence[Any], *, defended: bool = False) -> Dict[str, np.ndarray]:
        """Each party's embedding of the rows, ``{party: (n, d) float32}``.

        ``defended=False``: the bottom's raw output; ``True``: what the party
        would release (its defense's ``transform_embedding``, per batch of
        ``batch_size`` rows; a DP defense counts the pass in ``privacy_spent_``).
        The active party's own embedding is included (raw) when it has features.
        """
        self._check_fitted()
        if not isinstance(defended, (bool, np.bool_)):
            raise TypeError(f"defended must be a bool, got {type(defended).__name__}")
        parts = self._parts(X_parts)
        inference = "defended" if defended else "raw"
        return {p: h.cpu().numpy() for p, h in self._embeddings(parts, inference=inference).items()}

    def _embeddings(self, parts: List[np.ndarray], *, inference: str) -> Dict[str, Any]:
        torch = require_torch("split learning")
        device = torch.device(self.device_)
        names = list(self.passive_parties_) + (["active"] if self.active_features else [])
        out: Dict[str, List[Any]] = {p: [] for p in names}
        n = parts[0].shape[0]
        step = 0
        with torch.no_grad():
            for start in range(0, n, self.batch_size):
                idx = np.arange(start, min(n, start + self.batch_size), dtype=np.int64)
                batch = BatchInfo(epoch=int(self.epochs), step=step, global_step=-1, indices=idx)
                for i, party in enumerate(names):
                    module = self.bottoms_[party]
                    was_training = module.training
                    module.eval()
                    h = module(torch.from_numpy(parts[i][idx]).to(device))
                    module.train(was_training)
                    if party != "active" and inference == "defended":
                        h = self.party_defenses_[party].transform_embedding(party, h, batch)
                    out[party].append(h.detach().float())
                step += 1
        if inference == "defended":  # the pass was a release: the report includes it
            self.privacy_spent_ = {p: self.party_defenses_[p].privacy_spent() for p in self.passive_parties_}
        return {p: torch.cat(v, dim=0) for p, v in out.items()}

    def _outputs(self, X_parts: Sequence[Any]):
        torch = require_torch("split learning")
        self._check_fitted()
        parts = self._parts(X_parts)
        if self.inference not in INFERENCE_MODES:
            raise ValueError(f"inference must be one of {INFERENCE_MODES}, got {self.inference!r}")
        embeddings = self._embeddings(parts, inference=self.inference)
        names = list(self.passive_parties_) + (["active"] if self.active_features else [])
        with torch.no_grad():
            was_training = self.head_.training
            self.head_.eval()
            out = self.head_(torch.cat([embeddings[p] for p in names], dim=1))
            self.head_.train(was_training)
        return out.cpu()


    # -- saved models ----------------------------------------------------------------
    def save(self, path: Any) -> None:
        """Write the fitted model to ``path``: one ``.npz`` archive (every
        module's weights, a JSON header with the parameters, the fitted
        attributes and each party's defense; 0600, atomic, no pickle; format:
        :mod:`vflsec.splitnn.persistence`). Noise generators and seeds are not saved."""
        from .persistence import save_model

        save_model(self, path)

    @classmethod
    def load(cls, path: Any, *, bottoms: Any = None, head: Any = None, device: Optional[str] = None):
        """The model saved at ``path`` by :meth:`save`, predicting as it did.

        ``bottoms`` / ``head``: needed only when the model was fitted with
        modules or factories of the user's own (the same ones again; the
        defaults and the factories of :mod:`vflsec.splitnn.models` are
        rebuilt from the file). ``device``: where to load it (default: the
        saved ``device`` parameter, None/"auto" picking CUDA when available)."""
        from .persistence import load_model

        return load_model(cls, path, bottoms=bottoms, head=head, device=device)


class SplitNNClassifier(ClassifierMixin, _SplitNNBase):
    """Split-learning classifier (cross-entropy over the classes).

    Parameters
    ----------
    bottoms : None (an MLP ``in -> 64 -> embedding_dim`` per block), a torch
        Module (deep-copied for each block), a factory ``f(in_features) ->
        Module``, or a list of those, one per block.
    head : None (one linear layer), a Module, or ``f(in_features, n_outputs)``.
    defense : a :class:`~vflsec.splitnn.defenses.Defense` (None: unprotected).
    epochs, batch_size, lr, optimizer : training ("adam" with torch defaults, or "sgd").
    seed : model initialisation and mini-batch order (defense noise has its
        own opt-in seed on the defense; unseeded noise is cryptographically secure).
    device : None/"auto" (CUDA when available), "cpu", "cuda", ...
    active_features : ``X_parts[0]`` is the active party's own features
        (the active party first, as in the GLM estimator; see the module docstring).
    embedding_dim : output width of the default bottoms.
    inference : "raw" (default: the bottoms' outputs; deterministic, not a DP
        release) or "defended" (opt-in: the defense's noisy release, counted
        in ``privacy_spent_``); see the module docstring.
    verbose : int, default 0 (silent). At 1 or more, ``fit`` prints one line
        per epoch to stderr: ``epoch k/E: loss ..., accuracy ..., seconds`` and,
        for a DP defense, the largest (epsilon, delta) a passive party's copy
        reports (DP-SGD: composed over the steps taken so far; VFL-AFE: its
        composition over the planned epochs).

    Fitted attributes: ``classes_``, ``bottoms_`` ({party: Module}; parties
    ``passive_0``, ``passive_1``, ... and ``active``), ``head_``,
    ``history_`` (a dict of per-epoch lists, like the GLM estimator's:
    ``loss``, ``accuracy`` (training, as seen by the active party during the
    epoch), ``seconds``, ``bytes`` ({tag: bytes sent by all parties} per
    epoch)), ``bytes_by_tag_`` (whole run),
    ``privacy_spent_`` ({passive party: PrivacySpent or None}; training plus
    any ``inference="defended"`` passes),
    ``defense_`` (the set-up defense), ``party_defenses_`` (each party's copy).
    Using an unfitted model raises ``sklearn.exceptions.NotFittedError``.
    """

    _task = "classification"

    def _targets(self, y: Any) -> np.ndarray:
        if is_torch_tensor(y):
            y = y.detach().cpu().numpy()
        y = np.asarray(y)
        if y.ndim != 1 or y.size == 0:
            raise ValueError(f"y must be a non-empty 1-D array of labels, got shape {y.shape}")
        if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinite values")
        if y.dtype.kind not in "biuUfO" or y.dtype.kind == "c":
            raise TypeError(f"y has unsupported dtype {y.dtype}")
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"y needs at least 2 classes, got {len(self.classes_)}")
        return encoded.astype(np.int64)

    def predict_proba(self, X_parts: Sequence[Any]) -> np.ndarray:
        """Class probabilities (columns in ``classes_`` order) on per-party blocks as at fit;
        deterministic with ``inference="raw"`` (the default)."""
        torch = require_torch("split learning")
        return torch.softmax(self._outputs(X_parts).double(), dim=1).numpy()

    def predict(self, X_parts: Sequence[Any]) -> np.ndarray:
        """The most probable class of every row (labels as given at fit)."""
        winners = self._outputs(X_parts).argmax(dim=1).numpy()  # checks the model is fitted first
        return self.classes_[winners]


class SplitNNRegressor(RegressorMixin, _SplitNNBase):
    """Split-learning regressor: mean squared error on one output.

    Same parameters and fitted attributes as :class:`SplitNNClassifier`
    (``history_`` has no accuracy). ``score`` is the coefficient of
    determination R^2 (scikit-learn's regressor convention; higher is
    better); :meth:`mse` gives the mean squared error.
    """

    _task = "regression"

    def _targets(self, y: Any) -> np.ndarray:
        y, _ = as_float_array(y, "y", ndim=1, dtype=np.float32)
        return y

    def predict(self, X_parts: Sequence[Any]) -> np.ndarray:
        """The predicted value of every row (per-party blocks as at fit)."""
        return self._outputs(X_parts).reshape(-1).double().numpy()

    def mse(self, X_parts: Sequence[Any], y: Any) -> float:
        """Mean squared error of :meth:`predict` against ``y``."""
        y, _ = as_float_array(y, "y", ndim=1, dtype=np.float64)
        return float(np.mean((self.predict(X_parts) - y) ** 2))
