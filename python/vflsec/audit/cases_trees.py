"""Audits of label-DP vertical boosting (:mod:`vflsec.trees.dp`): its two mechanisms on a
worst-case pair of neighbouring label vectors, through the product's own code.

The pair: 8 rows whose labels are all 0 except row 0's, 0 in world 0 and 1 in world 1
(replace-one label). Each case's claim is the product's report for its job
(:func:`vflsec.trees.dp.privacy_spent`; epsilon 2, "dp" at delta 1e-5).

* ``trees_gradient[one round]``: one round's release of a one-round "dp" job at ``p = 1/2``
  for every row, claimed at the mechanism's epsilon for one release (the job also
  releases its positive count, not run here): the gradients from the protection's own
  :func:`~vflsec.trees.dp.label_gradients`, released by the job's mechanism and
  generator, all runs of a world in one call (runs independent releases); the
  distinguisher projects on the difference of the two worlds' exact gradients,
  whose norm is the stated sensitivity exactly.
* ``trees_gradient[3 rounds, whole protocol]``: a whole three-round job of an
  active and a passive party (:func:`vflsec.trees.protocol.active_program` and
  ``passive_program``) per run; what the passive party received each round (read
  from the transcript) scored as a passive party can: ``sum_t (q_t - g~_t)`` at row
  0, with ``q_t`` the predictions of round ``t`` from the trees grown so far (each
  round's mean shift is the label; their sum is the composition's likelihood-ratio
  test). The claim is the composed epsilon of the three rounds.
* ``trees_label_rr[stage one]``: randomized response with the uniform prior (the
  first stage, and what RRWithPrior does whenever its prior is unsure), all runs of
  a world in one call of the mechanism's release; the score is the released label.
* ``trees_label_rr[stage two, whole release]``: the product's whole two-stage
  release (:func:`~vflsec.trees.dp.rr_with_prior_labels`: stage one, the prior model,
  stage two) per run, on 16 rows whose one feature says nothing about the labels,
  the pair differing in the label of a stage-two row: its prior must not read its
  own label. The score is that row's released label.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, cast

import numpy as np

from .cases import AuditCase, Claim, Scores, case_seed, project, register_case

N, EPSILON, DELTA, ROUNDS = 8, 2.0, 1e-5, 3
RR_ROWS = 16


def _job(protection: str, max_iter: int = 1, noise_seed: Optional[int] = None, n: int = N) -> Any:
    from ..trees.job import TreeJob

    return TreeJob(n_samples=n, active="active", passives=("passive",), n_bins=((2,), (2,)), protection=protection,
                   max_iter=max_iter, min_samples_leaf=1, max_leaf_nodes=2, l2_regularization=1.0,
                   epsilon=EPSILON, delta=DELTA if protection == "dp" else None, noise_seed=noise_seed)


def _labels(world: int, n: int = N, row: int = 0) -> np.ndarray:
    y = np.zeros(n)
    y[row] = float(world)
    return y


def _claim(job: Callable[[], Any], source: str) -> Callable[[], Claim]:
    def claim() -> Claim:
        from ..trees.dp import privacy_spent

        spent = privacy_spent(job())
        assert spent is not None
        return Claim(spent.epsilon, spent.delta, spent.neighbours, source)
    return claim


def _one_release_claim() -> Claim:
    """The guarantee of one round's release alone (the mechanism's report for one release): a "dp"
    job also releases the positive count behind its baseline, which this case does not run."""
    from ..trees.dp import LABEL_NEIGHBOURS, gradient_mechanism

    spent = gradient_mechanism(_job("dp")).privacy_spent(DELTA, count=1)
    return Claim(spent.epsilon, spent.delta, LABEL_NEIGHBOURS,
                 "vflsec.trees.dp.gradient_mechanism(job).privacy_spent(delta, count=1), max_iter 1")


def _one_round(runs: int, seed: int) -> Scores:
    from ..trees.dp import DPGradientRelease, label_gradients

    outs, clean = [], []
    for world in (0, 1):
        job = _job("dp", noise_seed=case_seed(seed, "trees_gradient", world))
        protection = DPGradientRelease()
        protection.start(None, job, "active")
        g, _ = label_gradients(np.full(N, 0.5), _labels(world), job)
        clean.append(g)
        outs.append(protection.mechanism.release(np.tile(g, (runs, 1)), generator=protection.generator))
    scores = project(outs[0], outs[1], clean[1] - clean[0])
    distance = float(np.linalg.norm(clean[1] - clean[0]))
    return Scores(scores.world0, scores.world1, distance / protection.mechanism.sensitivity,
                  {"sigma": protection.mechanism.sigma}, stated_mu=distance / protection.mechanism.sigma)


def _codes(n: int) -> List[np.ndarray]:
    """Two parties' one feature each: two bins, alternating (a feature unrelated to the pair)."""
    column = (np.arange(n) % 2).astype(np.uint8)[:, None]
    return [column, column[::-1].copy()]


def _protocol_score(job: Any, y: np.ndarray) -> float:
    """One whole run; ``sum_t (q_t - g~_t)`` at row 0 from what the passive party received."""
    from ..federation.channel import InMemoryHub
    from ..trees.job import TreePartyData, TreePartyResult
    from ..trees.protocol import TAG_GRADIENTS, _sigmoid, active_program, passive_program
    from ..trees.tree import lookup_walker, tree_output
    from ..vfl.runner import run_programs

    codes = _codes(job.n_samples)
    data = {"active": TreePartyData(codes[0], y), "passive": TreePartyData(codes[1])}
    run = run_programs(job, {"active": active_program, "passive": passive_program}, data,
                       InMemoryHub(keep_payloads=True), label="audit trees")
    received = [p["g"] for r, p in run.hub.transcript if r.tag == TAG_GRADIENTS and r.receiver == "passive"]
    active, passive = (cast(TreePartyResult, run.results[name]) for name in ("active", "passive"))
    walk = lookup_walker([active.lookup, passive.lookup], codes)
    raw, score = np.full(job.n_samples, active.baseline), 0.0
    for tree, g_released in zip(active.trees, received):
        q = job.quantize(_sigmoid(raw))
        score += float(q[0] - g_released[0])
        raw += tree_output(tree, job.n_samples, walk)
    return score


def _whole_protocol(runs: int, seed: int) -> Scores:
    from .._progress import progress

    scores = []
    for world in (0, 1):
        y = _labels(world)
        base = case_seed(seed, "trees_protocol", world)
        scores.append(np.array([_protocol_score(_job("dp", ROUNDS, noise_seed=base + r), y)
                                for r in progress(range(runs), desc=f"trees protocol world {world}", unit="run",
                                                  leave=False, disable=runs < 500)]))
    return Scores(scores[0], scores[1], None, {"rounds": ROUNDS})


def _stage_one(runs: int, seed: int) -> Scores:
    from ..trees.dp import label_mechanism, noise_generator

    outs = []
    for world in (0, 1):
        job = _job("label_dp", noise_seed=case_seed(seed, "trees_label_rr", world))
        outs.append(label_mechanism(job).release(np.full(runs, world), generator=noise_generator(job)))
    mechanism = label_mechanism(_job("label_dp"))
    return Scores(outs[0].astype(np.float64), outs[1].astype(np.float64), None,
                  {"keep probability": mechanism.keep_probability})


def _stage_two_row() -> int:
    from ..trees.dp import stage_rows

    return int(stage_rows(RR_ROWS, _job("label_dp", n=RR_ROWS).seed)[1][0])


def _whole_release(runs: int, seed: int) -> Scores:
    from .._progress import progress
    from ..trees.dp import label_mechanism, noise_generator, rr_with_prior_labels

    row = _stage_two_row()
    codes = _codes(RR_ROWS)[0]  # row i's bin is i % 2; the labels follow (i // 2) % 2: unrelated to it
    scores, answered = [], 0
    for world in (0, 1):
        y = ((np.arange(RR_ROWS) // 2) % 2).astype(np.float64)
        y[row] = float(world)
        base = case_seed(seed, "trees_label_rr_two_stages", world)
        out = []
        for r in progress(range(runs), desc=f"label rr world {world}", unit="run", leave=False, disable=runs < 500):
            job = _job("label_dp", noise_seed=base + r, n=RR_ROWS)
            released, facts = rr_with_prior_labels(y, codes, job, label_mechanism(job), noise_generator(job))
            answered += facts["answered_by_prior"]
            out.append(released[row])
        scores.append(np.array(out))
    return Scores(scores[0], scores[1], None,
                  {"row": row, "stage-two rows answered by their prior, all runs": answered})


register_case(AuditCase(
    name="trees_gradient[one round]", mechanism="trees_gradient",
    pair="8 rows, p = 1/2, labels 0 except row 0 (0 or 1): g = p - y one unit apart in one coordinate",
    claim=_one_release_claim,
    run=_one_round, runs_full=2_000_000, runs_quick=200_000))
register_case(AuditCase(
    name="trees_gradient[3 rounds, whole protocol]", mechanism="trees_gradient",
    pair="8 rows of an active and a passive party, labels 0 except row 0 (0 or 1); three rounds, scored from "
         "what the passive party received",
    claim=_claim(lambda: _job("dp", ROUNDS), "vflsec.trees.dp.privacy_spent(job), max_iter 3"),
    run=_whole_protocol, runs_full=10_000, runs_quick=500))
register_case(AuditCase(
    name="trees_label_rr[stage one]", mechanism="trees_label_rr",
    pair="one label, 0 or 1, released by randomized response (the uniform prior)",
    claim=_claim(lambda: _job("label_dp"), "vflsec.trees.dp.privacy_spent(job)"),
    run=_stage_one, runs_full=2_000_000, runs_quick=200_000, fit="discrete"))
register_case(AuditCase(
    name="trees_label_rr[stage two, whole release]", mechanism="trees_label_rr",
    pair="16 rows, one uninformative feature; the label of a stage-two row 0 or 1; the whole two-stage release",
    claim=_claim(lambda: _job("label_dp", n=RR_ROWS), "vflsec.trees.dp.privacy_spent(job)"),
    run=_whole_release, runs_full=5_000, runs_quick=500, fit="discrete"))
