"""``vflsec bench scale``: how big a job fits on one party's machine, and beyond it.

Cells, each in processes of its own so that its peak memory is its own (:mod:`.probe`):

* **estimator**: one epoch of ``VerticalLogisticRegression`` per method (plain, hdp, ckks,
  paillier) against n on synthetic float64 blocks: wall and CPU seconds, peak resident memory
  over the data's bytes;
* **party**: a two-party ``vflsec party`` job (plain, hdp; mutual TLS on loopback, PSI on
  shuffled IDs) per n: each party's wall time split, and its peak resident memory over its
  data's bytes;
* **psi**: two-party PSI against n, bucketed on every core against the unbucketed sequential
  protocol (in one process, both parties on threads);
* **ray**: one Paillier epoch at ``ray_rows`` rows on the local process pool with 1 and 2
  workers and through Ray on a 1- and a 2-node cluster on this machine
  (``ray.cluster_utils.Cluster``), with a cost model fitted on the local runs that predicts an
  epoch on k nodes of c cores, checked against the Ray runs.

From the results alone (:mod:`.report`): growth exponents fitted per method, the "how big a job
fits" table with the largest n measured and the predicted time for 10^7 and 10^8 rows on 4 x 16
cores per party, PNGs of time and memory against n, and a plain-words conclusion.
"""
from .grid import EXPERIMENT

__all__ = ["EXPERIMENT"]
