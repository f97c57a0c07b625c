"""scikit-learn style estimator over the vertical GLM protocols.

``VerticalLogisticRegression(protection=...)`` trains one vertical GLM:

* ``"plain"`` -- idealized non-private VFL (IRs in the clear);
* ``"hdp"`` -- HDP-VFL, Gaussian noise on every released IR;
* any other registered protocol name (e.g. ``"paillier"``, ``"ckks"``, and
  with a DP model ``"paillier_dp"``, ``"ckks_dp"``: HE-VFL whose key holder
  adds Gaussian noise to every decrypted gradient, :mod:`vflsec.glm.he_dp`),
  looked up in :mod:`vflsec.glm.registry`;
* ``"centralized"`` -- the non-federated reference: scikit-learn
  ``LogisticRegression`` on all parties' features joined (loss "logistic"
  only; same penalty and strength, the same row preprocessing, and
  scikit-learn's own unpenalized intercept when ``fit_intercept``);
* ``"single_party"`` -- the same, on the active party's features only (the
  passive blocks of ``coef_`` are zeros).

``fit(X, y)`` takes one feature block per party, active party first
(rows aligned): ``X[0]`` is the active party's (it holds the labels),
``X[i]`` for ``i >= 1`` belongs to the passive party ``passive_{i-1}``
(``passive_0``, ``passive_1``, ...: the party convention shared with
:class:`vflsec.splitnn.SplitNNClassifier`, whose seeded defense noise is keyed
by these names). Or one 2-D array or DataFrame with ``party_columns``, a
mapping ``{party name: columns}`` (active party first), which is what
scikit-learn's tools pass (``cross_val_score``, ``GridSearchCV``, a
``Pipeline``): :mod:`vflsec.glm.party_input`. Blocks may be DataFrames; their
column names become ``feature_names_in_``. Each VFL party runs its own program in its own thread and
they interact only through an in-memory channel. The fitted model is the set
of per-party weight blocks ``coef_``; this estimator gathers them only to
predict in this in-memory setting -- in a real deployment each party keeps
its block and prediction is itself a VFL protocol (each party sends
``X_p w_p`` to the active party, which sums them).

The model's design -- the party blocks, the row normalisation
(``row_norm="clip"``: every row onto the unit ball), the intercept
(``fit_intercept=True``: the active party's constant column
``c = intercept_scaling``, its feature part projected onto the ball of radius
``sqrt(1 - c^2)`` so the DP row bound covers the constant; ``intercept_ =
c * w_c``), the label encoding, the metric and the privacy report -- is
:mod:`vflsec.glm.model`'s, the one ``vflsec party`` trains too. With
``row_norm=None`` the rows are used as given plus the constant, so for "hdp"
the caller must keep the active party's features within ``sqrt(1 - c^2)``
(the protocol refuses rows above norm 1).

scikit-learn: the estimator is a classifier (``is_classifier``, stratified
folds in ``cross_val_score``) for the classification losses "logistic" and
"svm", and a regressor for "least_squares" and "poisson" (its tags follow
``loss``: those losses predict numbers, and their ``score`` is R^2, so plain
folds and regression scoring are what fit them). ``class_weight`` and ``fit``'s
``sample_weight`` weight each row's loss as scikit-learn's do, where the protocol can
apply weights; a DP protocol refuses them (:mod:`vflsec.glm.weights`).
``save(path)`` / ``load(path)``
keep a fitted model as JSON (:mod:`vflsec.glm.persistence`).
"""
from __future__ import annotations

import math
import numbers
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Union, cast

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError

from .._arrays import check_positive_int, check_real
from .._progress import EpochProgress
from .checks import reference_predictions, resolve_delta, warn_single_class
from .job import LOSSES, PENALTIES, SIGNED_LABEL_LOSSES, GLMJob, GLMPartyResult, PartyData
from .model import (
    DEFAULT_INTERCEPT_SCALING,
    ROW_NORMS,
    GLMDesign,
    glm_metric,
    privacy_spent,
)
from .party_input import read_parties, read_parties_for
from .persistence import load_model, save_model
from .reference import fit_logistic_reference
from .registry import get_protocol
from .runner import run_job
from .weights import RowWeights, refuse_weights, row_weights

__all__ = ["VerticalLogisticRegression", "REFERENCE_PROTECTIONS", "design_blocks"]

REFERENCE_PROTECTIONS = ("centralized", "single_party")


def design_blocks(parts: Sequence[np.ndarray], *, fit_intercept: bool = True,
                  intercept_scaling: float = DEFAULT_INTERCEPT_SCALING,
                  row_norm: Optional[str] = "clip") -> List[np.ndarray]:
    """The per-party blocks the vertical protocols train on, exactly as
    :class:`VerticalLogisticRegression` (and ``vflsec party``) builds them:
    :meth:`vflsec.glm.model.GLMDesign.blocks`. (Used by the benchmarks' fast
    training path so it sees the same data as the protocols.)"""
    design = GLMDesign(fit_intercept=fit_intercept, intercept_scaling=intercept_scaling, row_norm=row_norm)
    return design.blocks([np.asarray(X, dtype=np.float64) for X in parts])


class VerticalLogisticRegression(ClassifierMixin, BaseEstimator):
    """Vertical federated GLM (logistic regression by default).

    Parameters
    ----------
    protection : "hdp" (default), "plain", "centralized", "single_party" or a
        registered protocol name ("paillier", "ckks", "taylor" = the HE flow in the
        clear, "paillier_dp" / "ckks_dp" = HE-VFL with a DP model, "taylor_dp"
        = its flow in the clear, "mpc" / "mpc_dp" = secret-sharing MPC without /
        with DP-SGD inside, ...).
    epsilon, delta, calibration : the DP budget of the whole training run and
        the Gaussian calibration ("analytic", the default, or the paper's
        "classic"; the HE-DP protocols calibrate by PLD accounting and refuse
        "classic"). ``epsilon`` is the total over every epoch and step, as
        Opacus' ``target_epsilon``: "hdp" calibrates each data party's whole
        sequence of released IRs as one Gaussian mechanism to ``(epsilon,
        delta)``, and the HE-DP protocols calibrate all epochs of noisy
        gradients together (``privacy_spent_`` reports what was spent, never
        above ``epsilon``). ``delta`` None (the default) is
        ``vflsec.dp.default_delta(n) = min(1e-5, 1/(10 n))`` for ``n``
        training rows (``delta_`` holds the value used); an explicit delta
        of at least ``1/n`` is used with a ``vflsec.dp.PrivacyWarning``. A
        budget a protocol cannot honour is refused (ValueError). Protections
        without DP noise ignore all three.
    loss : "logistic" (default), "svm" (L2-loss SVM), "least_squares"
        (targets are standardized internally and clipped to +-3 standard
        deviations) or "poisson" (counts; "hdp" needs the public bound
        ``y_max``).
    penalty, lam, mu : "l2", "l1" or "elasticnet" and their strengths.
    lr, epochs, batch_size : mini-batch gradient descent settings.
        ``batch_size`` is a row count (int; one larger than the data is the
        full batch) or a fraction of the training rows (float in (0, 1]).
    k : per-party weight-norm clip ``||w_P|| <= k`` (None disables; "hdp"
        needs it).
    seed, random_state : the public randomness, the mini-batch order (every
        party derives it; it is not secret). ``random_state`` is
        scikit-learn's name: None (default) uses ``seed`` (default 0, so a
        model is reproducible unless told otherwise: the same numbers as
        before ``random_state`` existed); an int is the seed; a
        ``numpy.random.RandomState``/``Generator`` gives one draw (the seed
        used is ``batch_seed_``). Giving both ``seed`` (other than 0) and a
        different ``random_state`` (another int, or any RandomState/Generator)
        is a ValueError.
    noise_seed : None (default) = OS-entropy noise; an int makes DP noise
        reproducible (testing only: whoever knows it knows the noise; it is
        never saved). noise : False disables DP noise -- a testing aid with
        no privacy.
    y_max : public upper bound of the labels (loss "poisson").
    key_bits, he_options : HE protocol settings (``he_options`` is a dict of
        protocol-specific public options passed to ``GLMJob.options``, e.g.
        ``{"encrypted_loss": True}``: the Taylor loss per epoch under
        encryption, one passive party only; default on for "paillier", off
        for "ckks", where it costs a whole ciphertext per batch; refused by the
        HE-DP protocols, where it would leave the DP guarantee; without it
        ``history_`` has no ``loss``).
    mpc_protocol : None (default), "cheetah", "aby3" or "semi2k": the secret-sharing
        engine protocol of ``protection="mpc"`` (:mod:`vflsec.glm.mpc`,
        :data:`vflsec.mpc.MPC_PROTOCOLS`, each with its threat model); None picks
        "cheetah" for two parties and "aby3" for three; "semi2k" (a trusted dealer:
        the active party) must be chosen. Also the engine of ``protection="mpc_dp"``
        (:mod:`vflsec.glm.mpc_dp`: DP-SGD on the joined features inside the engine,
        ``batch_size / n`` its Poisson rate, ``he_options={"momentum": m}``; the
        guarantee in ``privacy_spent_``). Other protections refuse it.
    class_weight : None (default), "balanced" or a dict label -> weight, as
        scikit-learn's (each row's loss times its class's weight, "balanced" =
        ``n / (2 * count(label))``, from the active party's labels; times
        ``fit``'s ``sample_weight``). Applied by "plain", "paillier", "taylor"
        and the references; the DP protocols and "ckks" refuse a weighted fit
        (ValueError naming why, :mod:`vflsec.glm.weights`).
    threshold : float in (0, 1), default 0.5: ``predict`` gives ``classes_[1]``
        when ``predict_proba`` is above it (loss "logistic" only; 0.5 is
        ``decision_function > 0``). Saved with the model.
    row_norm : "clip" (default) or None, see :mod:`vflsec.glm.model`.
    fit_intercept : bool, default True. The active party holds an intercept
        as a constant column (see :mod:`vflsec.glm.model`).
    intercept_scaling : float in (0, 1), the constant ``c`` of that column;
        the active party's features keep the radius ``sqrt(1 - c^2)``.
    party_columns : None (default: ``fit`` takes a list of per-party blocks)
        or a mapping ``{party name: column names or indices}``, active party
        first, saying which columns of one 2-D ``X`` (array or DataFrame) each
        party holds; every column belongs to exactly one party
        (:mod:`vflsec.glm.party_input`). This is how ``cross_val_score``,
        ``GridSearchCV`` and pipelines, which pass one 2-D ``X``, train it.
    timeout : seconds allowed for the whole federated run (None = no limit).
    verbose : int, default 0 (silent). At 1 or more, ``fit`` prints one line
        per epoch to stderr: ``epoch k/E: loss ..., accuracy ..., seconds``
        and, for "hdp", the run's (epsilon, delta) budget (the noise is
        calibrated to the whole sequence of releases, so there is no
        per-epoch figure). The references ("sklearn", "centralized") print
        nothing.
    executor : None (default: the process's, :func:`vflsec.he.get_executor`)
        or a :class:`vflsec.he.Executor` the HE protocols' vector work runs on
        during ``fit`` (e.g. ``vflsec.he.RayExecutor(address)``: Ray tasks on a
        cluster; the key holder still decrypts in this process). It is the
        process's executor for the duration of the fit (:func:`vflsec.he.use_executor`);
        the fitted numbers do not depend on it. Not saved by ``save``.

    The defaults (``lr=2.5, epochs=10, batch_size=1/16, k=5``) were measured
    on Breast / Credit / Adult with ``vertical_split``'s default scaling:
    160 steps bring plain VFL within ~0.6 accuracy points of scikit-learn on
    all three. They also suit "hdp": its sensitivity grows with the number
    of steps per epoch and with ``lr``, so few, large batches (on Adult at
    epsilon=1 the old batch of 64 rows with lr=1, k=1 gave passive noise
    sigma 424 for IRs bounded by 1; these defaults give 73 for IRs bounded
    by 5); ``lr=2.5`` is within HDP-VFL's non-expansiveness bound
    ``2 / (n_parties * beta_theta + lam)`` for the logistic loss with up to
    3 parties; ``k=5`` leaves the fitted weights (norms ~3-5 incl. the
    intercept on Adult) unclipped, whereas ``k=1`` forced Credit/Adult to
    the majority class. They are tuned for the logistic loss: for "hdp" with loss "poisson" pass a small
    ``k`` (its smoothness ``beta_theta`` grows like ``exp(n_parties * k)``,
    and with it the learning-rate bound shrinks), and the SVM and least
    squares (``beta_theta = 2``) need ``lr <= 2 / (2 n_parties + lam)``,
    about 0.5 for two parties.

    Attributes
    ----------
    coef_ : list of 1-D arrays, one feature-weight block per party (active
        first, then ``passive_0``, ``passive_1``, ...; the intercept is not in it).
    n_features_in_ : number of feature columns seen at fit (all parties).
    feature_names_in_ : the column names seen at fit, when every block (or
        the one table) was a DataFrame with string column names: the table's
        columns, or the blocks' joined in party order. Prediction then
        selects DataFrame columns by name.
    party_names_ : the parties in order: ``party_columns``' names, or
        ``("active", "passive_0", ...)`` for a list of blocks.
    party_columns_ : ``{party: column positions in X}`` resolved from
        ``party_columns`` (None for a list of blocks).
    delta_ : the delta the fit used (``default_delta(n)`` when ``delta`` is None).
    batch_seed_ : the seed of the mini-batch order the fit used.
    intercept_ : float, ``c * w_c`` (0.0 when ``fit_intercept=False``).
    batch_size_ : the mini-batch size used (rows).
    active_radius_ : norm bound of the active party's feature part
        (``sqrt(1 - intercept_scaling^2)``, or 1 without an intercept),
        applied again at prediction.
    classes_ : the two labels for classification losses (``classes_[1]`` is +1).
    y_mean_, y_scale_ : least squares: the training labels' mean and standard
        deviation the targets were standardized with.
    design_ : the fitted :class:`vflsec.glm.model.GLMDesign` (row
        normalisation, intercept), applied again at prediction.
    labels_ : the fitted :class:`vflsec.glm.model.LabelEncoding`.
    history_ : dict with per-epoch lists ``loss`` (and ``accuracy``) seen by the
        active party (HE protocols: ``loss`` only with the encrypted loss, see
        ``he_options``), ``time`` (``wall`` seconds of the run, and
        ``compute``/``crypto``/``messaging`` seconds summed over parties),
        ``party_time`` (that split per party), ``bytes_by_tag``,
        ``total_bytes``, ``n_messages``, and for "hdp" ``sigma_active``,
        ``sigma_passive``, the sensitivities and, with noise, the active
        party's ``releases`` (1) and ``epsilon_spent``; for the HE-DP protocols
        ``dp_noise_multiplier``, ``dp_sigma_gradient`` (the noise std on a
        party's gradient), ``dp_sensitivity_gradient``,
        ``dp_releases_per_row`` (the epochs) and ``epsilon_spent``.
    privacy_spent_ : {party name: vflsec.dp.PrivacySpent or None}. For "hdp"
        with noise, each data party's released IR sequence is one Gaussian
        mechanism calibrated to ``(epsilon, delta)`` for the whole run
        (:func:`vflsec.glm.hdp.hdp_mechanisms`: "hdp_active_ir" for the active
        party, "hdp_passive_ir" for each passive one); this is the mechanism's
        own report, :meth:`~vflsec.dp.GaussianMechanism.privacy_spent`
        (``releases=1``, PLD accountant, replace-one neighbours): at most
        ``epsilon`` ("classic" calibrates more noise than needed, and is an
        (epsilon, delta) guarantee only for epsilon < 1). For "paillier_dp",
        "ckks_dp" and "taylor_dp" with noise, one guarantee for every data party
        (:func:`vflsec.glm.he_dp.he_dp_privacy_spent`): every block's noisy
        gradients over the run ("he_dp_gradient", one release per epoch for each
        row, PLD, replace-one), which covers every party's weights and the
        final model against every other data party; its ``caveat`` names what
        it does not cover (the key holder, who sees gradients masked but not
        noised, in collusion with a party). None for every party of a
        protection without DP noise (plain, HE, references, noise=False).

    A fitted DP model ("hdp", the HE-DP protocols with noise) that predicts
    one class for every training row warns (``vflsec.dp.PrivacyWarning``),
    saying whether the non-private reference predicts that class too (a rare
    label at this threshold, not the noise) or not (the noise has drowned the
    signal), :mod:`vflsec.glm.checks`. Using an unfitted model raises
    ``sklearn.exceptions.NotFittedError``.
    """

    def __init__(
        self,
        protection: str = "hdp",
        *,
        epsilon: float = 1.0,
        delta: Optional[float] = None,
        calibration: str = "analytic",
        loss: str = "logistic",
        penalty: str = "l2",
        lam: float = 0.001,
        mu: float = 1.0,
        lr: float = 2.5,
        epochs: int = 10,
        batch_size: Union[int, float] = 1 / 16,
        k: Optional[float] = 5.0,
        seed: int = 0,
        random_state: Any = None,
        noise_seed: Optional[int] = None,
        noise: bool = True,
        y_max: Optional[float] = None,
        key_bits: int = 3072,
        he_options: Optional[Dict[str, Any]] = None,
        mpc_protocol: Optional[str] = None,
        class_weight: Any = None,
        threshold: float = 0.5,
        row_norm: Optional[str] = "clip",
        fit_intercept: bool = True,
        intercept_scaling: float = 0.5,
        party_columns: Optional[Dict[str, Sequence[Any]]] = None,
        timeout: Optional[float] = None,
        verbose: int = 0,
        executor: Any = None,
    ):
        self.protection = protection
        self.epsilon = epsilon
        self.delta = delta
        self.calibration = calibration
        self.loss = loss
        self.penalty = penalty
        self.lam = lam
        self.mu = mu
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.k = k
        self.seed = seed
        self.random_state = random_state
        self.noise_seed = noise_seed
        self.noise = noise
        self.y_max = y_max
        self.key_bits = key_bits
        self.he_options = he_options
        self.mpc_protocol = mpc_protocol
        self.class_weight = class_weight
        self.threshold = threshold
        self.row_norm = row_norm
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.party_columns = party_columns
        self.timeout = timeout
        self.verbose = verbose
        self.executor = executor

    # -- scikit-learn ----------------------------------------------------------
    def __sklearn_tags__(self) -> Any:
        """A classifier's tags for the classification losses, a regressor's for
        "least_squares" and "poisson" (module docstring)."""
        tags = super().__sklearn_tags__()
        if self.loss not in SIGNED_LABEL_LOSSES:
            from sklearn.utils import RegressorTags

            tags.estimator_type = "regressor"
            tags.classifier_tags = None
            tags.regressor_tags = RegressorTags()
        return tags

    @property
    def _estimator_type(self) -> str:  # scikit-learn < 1.6 reads this instead of the tags
        return "classifier" if self.loss in SIGNED_LABEL_LOSSES else "regressor"

    # -- input handling ------------------------------------------------------
    def _batch_seed(self) -> Any:
        """The mini-batch order's seed: ``random_state`` when given (an int, or one
        draw of a numpy RandomState / Generator), else ``seed`` (GLMJob checks it)."""
        state = self.random_state
        if state is None:
            return self.seed
        generator = isinstance(state, (np.random.RandomState, np.random.Generator))
        if not generator and (isinstance(state, (bool, np.bool_)) or not isinstance(state, numbers.Integral)):
            raise TypeError(f"random_state must be None, an int or a numpy RandomState/Generator, got "
                            f"{type(state).__name__}")
        # seed 0 is the default, so only another seed conflicts (a generator's draw is "another" seed too).
        seed_given = not (isinstance(self.seed, numbers.Integral) and not isinstance(self.seed, (bool, np.bool_))
                          and self.seed == 0)
        if seed_given and (generator or self.seed != state):
            shown = type(state).__name__ if generator else repr(state)
            raise ValueError(f"seed={self.seed!r} and random_state={shown} both set the mini-batch order -- give "
                             "only one (random_state is scikit-learn's name for seed)")
        if isinstance(state, np.random.RandomState):
            return int(state.randint(2**31 - 1))
        if isinstance(state, np.random.Generator):
            return int(state.integers(2**31 - 1))
        return int(state)

    def _uses_delta(self, protocol_name: str) -> bool:
        """True when a run of ``protocol_name`` releases under (epsilon, delta)-DP."""
        if self.noise is not True or protocol_name in REFERENCE_PROTECTIONS:
            return False
        from .he_dp import is_he_dp_protocol

        return protocol_name == "hdp" or is_he_dp_protocol(protocol_name)

    def _design(self) -> GLMDesign:
        """The model's design from the parameters (:mod:`vflsec.glm.model`)."""
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise TypeError(f"fit_intercept must be a bool, got {type(self.fit_intercept).__name__}")
        return GLMDesign(loss=self.loss, fit_intercept=bool(self.fit_intercept),
                         intercept_scaling=self.intercept_scaling, row_norm=self.row_norm)

    def _targets(self, labels_of: GLMDesign, y: Any, n: int) -> np.ndarray:
        """The loss's targets from ``y`` (the label encoding fitted here, kept
        as ``labels_`` with ``classes_`` or ``y_mean_``/``y_scale_``)."""
        labels = labels_of.fit_labels(y).with_threshold(self.threshold)
        signed = labels.encode(y)
        if signed.shape[0] != n:
            raise ValueError(f"y has {signed.shape[0]} entries, X has {n} rows")
        self.labels_ = labels
        if labels.classes is not None:
            self.classes_ = labels.classes
        if self.loss == "least_squares":
            self.y_mean_, self.y_scale_ = labels.mean, labels.scale
        return signed

    def _batch_size(self, n: int) -> int:
        """Rows per mini-batch: an int is a row count (clamped to ``n``: a
        batch larger than the data is the full batch), a float in (0, 1] a
        fraction of ``n`` (rounded up). Both are public (``n`` is)."""
        b = self.batch_size
        if isinstance(b, numbers.Real) and not isinstance(b, (bool, numbers.Integral)):
            fraction = check_real(b, "batch_size", low=0.0, low_inclusive=False, high=1.0)
            return max(1, min(n, math.ceil(fraction * n)))
        return min(check_positive_int(b, "batch_size"), n)

    def _job(self, protocol_name: str, design: GLMDesign, parts: Sequence[np.ndarray],
             needs_coordinator: bool, *, uses_delta: bool, weighted: bool = False) -> GLMJob:
        """The public job of a fit on the feature arrays ``parts`` (active
        first): its ``widths`` are the design's blocks', the intercept column
        included; ``delta`` resolved (:func:`vflsec.glm.checks.resolve_delta`)."""
        n, n_parties = parts[0].shape[0], len(parts)
        batch_size = self._batch_size(n)
        passives = tuple(f"passive_{i}" for i in range(n_parties - 1))
        widths = design.widths({name: X.shape[1] for name, X in zip(("active", *passives), parts)}, "active")
        return GLMJob(
            protocol=protocol_name,
            n_samples=n,
            loss=self.loss,
            penalty=self.penalty,
            lam=self.lam,
            mu=self.mu,
            lr=self.lr,
            epochs=self.epochs,
            batch_size=batch_size,
            k=self.k,
            seed=self._batch_seed(),
            active="active",
            passives=passives,
            coordinator="coordinator" if needs_coordinator else None,
            epsilon=self.epsilon,
            delta=resolve_delta(self.delta, n, warn=uses_delta),
            calibration=self.calibration,
            noise=self.noise,
            noise_seed=self.noise_seed,
            y_max=self.y_max,
            key_bits=self.key_bits,
            options=self._options(protocol_name),
            widths=widths,
            weighted=weighted,
        )

    def _options(self, protocol_name: str) -> Dict[str, Any]:
        """``GLMJob.options``: ``he_options``, and for "mpc" / "mpc_dp" the engine protocol."""
        options = dict(self.he_options or {})
        if self.mpc_protocol is not None:
            if protocol_name not in ("mpc", "mpc_dp"):
                raise ValueError(f"mpc_protocol is an option of protections 'mpc' and 'mpc_dp', not "
                                 f"{self.protection!r} -- remove mpc_protocol, or use protection='mpc'")
            options["mpc_protocol"] = self.mpc_protocol
        return options

    # -- fitting -------------------------------------------------------------
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> "VerticalLogisticRegression":
        """Train on ``X`` -- a list of per-party feature blocks (active first), or
        one 2-D array/DataFrame with ``party_columns`` -- and the active party's
        labels ``y``. ``sample_weight``: None, or one loss weight per row (with
        ``class_weight``, see the class docstring)."""
        if not isinstance(self.protection, str):
            raise TypeError(f"protection must be a str, got {type(self.protection).__name__}")
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if self.penalty not in PENALTIES:
            raise ValueError(f"penalty must be one of {PENALTIES}, got {self.penalty!r}")
        if self.row_norm not in ROW_NORMS:
            raise ValueError(f"row_norm must be one of {ROW_NORMS}, got {self.row_norm!r}")
        if self.he_options is not None and not isinstance(self.he_options, dict):
            raise TypeError(f"he_options must be a dict or None, got {type(self.he_options).__name__}")
        design = self._design()
        inputs = read_parties(X, self.party_columns)
        parts = inputs.parts
        n = parts[0].shape[0]
        y_signed = self._targets(design, y, n)
        if self.protection not in REFERENCE_PROTECTIONS:
            refuse_weights(get_protocol(self.protection), self.class_weight, sample_weight)  # before any weight
        weights = row_weights(self.class_weight, sample_weight, self.labels_, y, n)
        if self.protection in REFERENCE_PROTECTIONS:
            # Validate the shared hyper-parameters the same way for every method.
            job = self._job("plain", design, parts, False, uses_delta=False)
            roles = ["active"] + ["passive"] * (len(parts) - 1)
            self._fit_reference([design.features(X, role) for X, role in zip(parts, roles)], y_signed,
                                None if weights is None else weights.of(np.arange(n), y_signed))
        else:
            protocol = get_protocol(self.protection)
            job = self._job(self.protection, design, parts, protocol.needs_coordinator,
                            uses_delta=self._uses_delta(self.protection), weighted=weights is not None)
            # Blocks built batch by batch (DesignedRows): the plain/hdp programs then hold no copy of the data;
            # any other protocol builds its whole block once (PartyData.checked).
            self._fit_vfl(job, design, design.blocks(parts, by_batch=True), y_signed, weights)
        self.batch_size_ = job.batch_size
        self.batch_seed_ = job.seed
        self.delta_ = job.delta
        self.n_parties_ = len(parts)
        self.n_features_in_ = inputs.n_features
        if inputs.feature_names is not None:
            self.feature_names_in_ = inputs.feature_names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.party_names_ = inputs.party_names
        self.party_columns_ = inputs.party_columns
        self.design_ = design
        self.active_radius_ = design.active_radius
        spent = self._privacy_spent(job)
        # Keyed by the caller's party names (party_columns' keys, as party_names_): the job runs under default ones.
        self.privacy_spent_ = {name: spent[internal]
                               for name, internal in zip(self.party_names_, (job.active, *job.passives))}
        if self.labels_.classes is not None and any(spent is not None for spent in self.privacy_spent_.values()):
            predicted = self.labels_.predict(design.decision_function(parts, self.coef_, self.intercept_))
            # The non-private reference is fitted only when the warning needs it (one class predicted): it is
            # not part of the protocol, and runtime cells time the whole fit.
            reference = None if np.unique(predicted).size > 1 else reference_predictions(
                design, parts, y_signed, self.labels_, lam=self.lam, penalty=self.penalty, mu=self.mu)
            warn_single_class(predicted, f"{type(self).__name__}({self.protection!r})", self.epsilon, y=y,
                              reference=reference)
        return self

    def _privacy_spent(self, job: GLMJob) -> Dict[str, Any]:
        return {name: privacy_spent(job, job.role_of(name)) for name in (job.active, *job.passives)}

    def _progress(self, job: GLMJob) -> Optional[EpochProgress]:
        """The active party's per-epoch line printer for ``verbose`` >= 1 (else None)."""
        if isinstance(self.verbose, bool) or not isinstance(self.verbose, numbers.Integral):
            raise TypeError(f"verbose must be an int, got {type(self.verbose).__name__}")
        if self.verbose < 1:
            return None
        budget = self._privacy_spent(job)[job.active]

        def emit(line: str) -> None:
            print(f"[{type(self).__name__} {self.protection}] {line}", file=sys.stderr, flush=True)

        return EpochProgress(job.epochs, emit, epsilon=(lambda: budget) if budget is not None else None)

    def _fit_vfl(self, job: GLMJob, design: GLMDesign, blocks: Sequence[Any], y_signed: np.ndarray,
                 weights: Optional[RowWeights]) -> None:
        data = {job.active: PartyData(blocks[0], y_signed, progress=self._progress(job), weights=weights)}
        data.update({name: PartyData(X) for name, X in zip(job.passives, blocks[1:])})
        from ..he.executor import use_executor

        start = time.perf_counter()
        with use_executor(self.executor):
            run = run_job(job, data, timeout=self.timeout)
        wall = time.perf_counter() - start
        # cast: every GLM protocol's party programs return GLMPartyResult (JobResult holds the base type).
        results = cast(Dict[str, GLMPartyResult], run.results)
        coef = []
        for name in (job.active, *job.passives):
            # cast: the data parties (active, passives) always return their weight block; only a coordinator has None.
            features, intercept = design.split_coef(cast(np.ndarray, results[name].coef), job.role_of(name))
            coef.append(features)
            if name == job.active:
                self.intercept_ = cast(float, intercept)
        self.coef_ = coef
        active = results[job.active]
        history: Dict[str, Any] = {key: list(values) for key, values in active.history.items()}
        party_time = {name: dict(res.timings) for name, res in run.results.items()}
        history["time"] = {"wall": wall}
        for phase in ("compute", "crypto", "messaging"):
            history["time"][phase] = sum(t.get(phase, 0.0) for t in party_time.values())
        history["party_time"] = party_time
        history["bytes_by_tag"] = run.bytes_by_tag()
        history["total_bytes"] = run.total_bytes()
        history["n_messages"] = len(run.records)
        history.update(active.info)
        engine = {name: {"bytes_in": res.info["engine_bytes_in"], "bytes_out": res.info["engine_bytes_out"]}
                  for name, res in results.items() if "engine_bytes_in" in res.info}
        if engine:  # an MPC engine's own link, measured by its link provider (vflsec.mpc.links.MeteredLinks)
            history["engine_bytes"] = engine
            history["engine_total_bytes"] = sum(v["bytes_in"] + v["bytes_out"] for v in engine.values())
        self.history_ = history

    def _fit_reference(self, parts: List[np.ndarray], y_signed: np.ndarray,
                       sample_weight: Optional[np.ndarray]) -> None:
        if self.loss != "logistic":
            raise ValueError(f"protection {self.protection!r} is a logistic-regression reference; "
                             "loss must be 'logistic'")
        X = np.hstack(parts) if self.protection == "centralized" else parts[0]
        start = time.perf_counter()
        w, self.intercept_ = fit_logistic_reference(X, y_signed, lam=self.lam, penalty=self.penalty, mu=self.mu,
                                                    fit_intercept=bool(self.fit_intercept),
                                                    sample_weight=sample_weight)
        wall = time.perf_counter() - start
        if self.protection == "centralized":
            bounds = np.cumsum([0] + [p.shape[1] for p in parts])
            self.coef_ = [w[bounds[i]:bounds[i + 1]].copy() for i in range(len(parts))]
        else:
            self.coef_ = [w.copy()] + [np.zeros(p.shape[1]) for p in parts[1:]]
        self.history_ = {
            "time": {"wall": wall, "compute": wall, "crypto": 0.0, "messaging": 0.0},
            "bytes_by_tag": {},
            "total_bytes": 0,
            "n_messages": 0,
        }

    # -- prediction ----------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise NotFittedError("this VerticalLogisticRegression is not fitted yet; call fit first")

    def _prediction_parts(self, X: Any) -> List[np.ndarray]:
        return read_parties_for(X, [len(w) for w in self.coef_], feature_names=getattr(self, "feature_names_in_", None),
                                party_columns=getattr(self, "party_columns_", None), who=type(self).__name__)

    def decision_function(self, X: Any) -> np.ndarray:
        """``theta = sum_p X_p w_p + intercept_`` on the rows as the fitted
        design preprocesses them (linear predictor, standardized scale for
        least squares). ``X`` as at fit: per-party blocks, or one table
        split by the fitted party columns."""
        self._check_fitted()
        return self.design_.decision_function(self._prediction_parts(X), self.coef_, self.intercept_)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities ``[P(classes_[0]), P(classes_[1])]`` (loss "logistic" only)."""
        if self.loss != "logistic":
            raise ValueError(f"predict_proba needs loss 'logistic', this model has loss {self.loss!r}")
        from scipy.special import expit

        p1 = expit(self.decision_function(X))
        return np.column_stack([1.0 - p1, p1])

    def _labels(self) -> Any:
        """The fitted label encoding deciding at the current ``threshold``."""
        return self.labels_ if self.threshold == self.labels_.threshold else self.labels_.with_threshold(self.threshold)

    def predict(self, X: Any) -> np.ndarray:
        """Class labels (logistic: sigmoid(theta) > threshold; svm: theta > 0), the
        target for least squares, the mean count exp(theta) for poisson."""
        theta = self.decision_function(X)  # checks the model is fitted
        return self._labels().predict(theta)

    def score(self, X: Any, y: Any, sample_weight: Optional[Sequence[float]] = None) -> float:
        """Accuracy for classification losses, R^2 otherwise (the model's
        metric, :func:`vflsec.glm.model.glm_metric`); with ``sample_weight``
        the weighted accuracy or R^2 of scikit-learn's metrics (an evaluation,
        so weights are fine here, unlike in ``fit``)."""
        theta = self.decision_function(X)
        y_arr = np.asarray(y)
        if y_arr.shape != theta.shape:
            raise ValueError(f"y has shape {y_arr.shape}, X has {theta.shape[0]} rows")
        if sample_weight is not None:
            from sklearn.metrics import accuracy_score, r2_score

            metric = accuracy_score if self.labels_.classes is not None else r2_score
            return float(metric(y_arr, self._labels().predict(theta), sample_weight=sample_weight))
        if self.labels_.classes is not None:
            return float(np.mean(self._labels().predict(theta) == y_arr))
        value = glm_metric(self.labels_.loss, theta, y_arr, self.labels_)["value"]
        if value is None:  # constant labels: scikit-learn's r2_score convention
            return 1.0 if np.array_equal(self.labels_.predict(theta), y_arr.astype(np.float64)) else 0.0
        return float(value)

    # -- persistence ---------------------------------------------------------
    def save(self, path: Any) -> None:
        """Write the fitted model to ``path`` as JSON (0600, atomic; no pickle):
        the parameters, every party's weights, the design, the label encoding,
        ``privacy_spent_`` (:mod:`vflsec.glm.persistence`). Not saved: the
        noise seed (saved as None), HE keys, ``history_``."""
        self._check_fitted()
        save_model(self, path)

    @classmethod
    def load(cls, path: Any) -> "VerticalLogisticRegression":
        """A model written by :meth:`save`; it predicts exactly as the saved one
        (ValueError naming the file for anything else)."""
        return load_model(cls, path)
