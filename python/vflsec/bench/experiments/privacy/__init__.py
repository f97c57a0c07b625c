"""``vflsec bench privacy``: every defense scored against the attacks it should stop.

Split learning (:mod:`vflsec.splitnn`): for each defense and strength of the grid
the same two-party split MLP is trained on the same data, split and seeds over an
``InMemoryHub(keep_payloads=True)``; each attack then gets only what its
adversary sees (:mod:`vflsec.attacks.views`: the messages addressed to it, plus
the released models and auxiliary data its threat model grants):

* active party -> passive features: ``model_inversion_blackbox`` (decoder
  trained on the attacker's auxiliary rows and their released embeddings),
  ``model_inversion_whitebox`` (optimize inputs against the released bottom);
* passive party -> labels: ``norm_scoring``, ``direction_scoring`` (the
  gradients it received in the last epoch), ``model_completion`` (its own
  bottom + 40 auxiliary labels), ``direct_label`` (on a second model whose
  head is a plain softmax over summed party logits, the attack's precondition);
* active party -> membership: ``membership_shadow`` (Shokri et al. shadow
  models trained like the target on the attacker's shadow rows, attack on the
  released embeddings of training rows vs held-out rows).

Vertical logistic regression (:mod:`vflsec.glm`): ``equality_solving`` by the
active party on the passive IRs it receives in plain, HDP-VFL and encrypted
(CKKS, Paillier) training, knowing 30 auxiliary rows.

Outputs: ``results.json`` (the runner's envelope; ``"attacks"``: one row per
dataset x defense x strength x attack x metric; ``"cap"``: FedPass's calibrated
averaged performance; ``"settings"``), ``report.md`` and PNG plots
(``tradeoff_<dataset>.png``: accuracy vs recovery error like FedPass Fig. 4;
``equality_solving.png``).

Modules: :mod:`.grid` (``privacy.toml``'s grid and the Experiment: ``--datasets``,
``--data-dir``), :mod:`.training` (the data each party holds and the split model
every cell trains), :mod:`.cells` (the attacks, cell by cell), :mod:`.scoring`
(FedPass's recovery error and CAP), :mod:`.report`.
"""
from .grid import EXPERIMENT

__all__ = ["EXPERIMENT"]
