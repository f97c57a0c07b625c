"""Privacy attacks on vertical federated learning, for scoring defenses.

Every attack is a function (or estimator) over what its adversary observes --
embeddings, gradients returned to a passive party, released bottom models,
intermediate-result messages -- never over another party's private data or
the training framework's internals. Each module documents its threat model:

* :mod:`.label_inference` (passive party infers the active party's labels):
  :func:`direct_label_inference`, :func:`norm_scoring`,
  :func:`direction_scoring`, :func:`model_completion`.
* :mod:`.model_inversion` (active party infers passive features from
  embeddings): :func:`blackbox_model_inversion`,
  :func:`whitebox_model_inversion`.
* :mod:`.equality_solving` (active party infers passive features from a
  vertical GLM's intermediate results): :func:`equality_solving_attack`,
  :func:`solve_linear_features`, :func:`active_party_view`.
* :mod:`.membership`: :class:`ShadowModelAttack` (Shokri et al. 2017).
* :mod:`.tree_leakage` (passive party of vertical boosting infers the labels
  from node instance spaces and readable gradients): :func:`passive_tree_view`,
  :func:`instance_space_attack`, :func:`gradient_attack`, :func:`label_leakage`.
* :mod:`.views`: the messages each split-learning adversary receives, from
  a hub transcript (:func:`passive_party_gradients`,
  :func:`active_party_embeddings`).
* :mod:`.metrics`: recovery MSE, label / membership attack scores, CAP.

torch is imported only by the attacks that train or invert torch models.
"""
from .equality_solving import (
    ActivePartyView,
    EqualitySolvingResult,
    active_party_view,
    equality_solving_attack,
    solve_linear_features,
)
from .label_inference import (
    LabelInference,
    choose_auxiliary,
    direct_label_inference,
    direction_scoring,
    model_completion,
    norm_scoring,
)
from .membership import ShadowModelAttack, attack_features
from .metrics import (
    calibrated_averaged_performance,
    feature_mse,
    label_attack_accuracy,
    membership_scores,
    normalized_feature_mse,
)
from .model_inversion import (
    blackbox_model_inversion,
    query_embeddings,
    total_variation,
    whitebox_model_inversion,
)
from .tree_leakage import TreeView, gradient_attack, instance_space_attack, label_leakage, passive_tree_view
from .views import active_party_embeddings, last_epoch, passive_party_gradients

__all__ = [
    "ActivePartyView",
    "EqualitySolvingResult",
    "LabelInference",
    "ShadowModelAttack",
    "TreeView",
    "active_party_embeddings",
    "active_party_view",
    "attack_features",
    "blackbox_model_inversion",
    "calibrated_averaged_performance",
    "choose_auxiliary",
    "direct_label_inference",
    "direction_scoring",
    "equality_solving_attack",
    "feature_mse",
    "gradient_attack",
    "instance_space_attack",
    "label_attack_accuracy",
    "label_leakage",
    "last_epoch",
    "membership_scores",
    "model_completion",
    "normalized_feature_mse",
    "norm_scoring",
    "passive_party_gradients",
    "passive_tree_view",
    "query_embeddings",
    "solve_linear_features",
    "total_variation",
    "whitebox_model_inversion",
]
