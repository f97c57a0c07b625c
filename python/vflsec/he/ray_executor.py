"""A party's HE vector work as Ray tasks: :class:`RayExecutor`.

Each chunk of an operation (:mod:`vflsec.he.executor`) is one Ray task that
needs one CPU, spread over the cluster's nodes; a vector-matrix product is
split by rows and the per-shard products multiplied together by the caller.
The cluster is the party's own: cross-party traffic stays on the party's
gRPC/mTLS transport, and every node needs the same vflsec (and phe, gmpy2)
installed. What a task gets is the public modulus, the public DJN base and
plain integers (module docstring of :mod:`vflsec.he.executor`); decryption
never goes to Ray, and a chunk function marked
:func:`~vflsec.he.executor.local_only` is refused.

Connecting. ``ray.init`` is called only when Ray is not initialised in this
process yet: with ``address`` (``"HOST:PORT"`` of the head node's GCS, 6379
for ``ray start --head``, or ``"auto"``: ``RAY_ADDRESS`` or the cluster last
started on this machine) after checking that something answers there, so a
wrong address fails in seconds instead of Ray retrying for minutes; without
it a Ray instance of its own on this machine (``num_cpus`` CPUs). When Ray
is already initialised its connection is used as it is. :meth:`close` calls
``ray.shutdown()`` only for a connection this executor made (which stops the
local instance it started, or disconnects this driver from a cluster it
joined); it never stops a cluster it did not start.

Failures. A task whose worker or node dies is retried on another node
(``max_retries`` times, Ray's task retry). A job that still fails, that has
no CPU left in the cluster to run on, or that runs past ``timeout_s`` raises
a RuntimeError of one line that names the function, the cluster and the
nodes that died during the job; its remaining tasks are cancelled. An
exception raised by the chunk function itself is raised as it is (its own
type and message). Nothing waits without a bound: the pending tasks are
checked every ``poll_s`` seconds.
"""
from __future__ import annotations

import collections
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

from .._arrays import check_positive_int, check_real
from .executor import Executor, is_local_only

__all__ = ["RayExecutor"]

# While a job runs, its pending tasks and the cluster's nodes are looked at this often.
_POLL_S = 0.5
# After a task failed for a system reason, how long to wait for the cluster to report which node died.
_DEATH_REPORT_S = 10.0
_connect_lock = threading.Lock()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError("RayExecutor needs Ray: pip install \"vflsec[ray]\"") from exc
    return ray


def _run_chunk(func: Callable[..., Any], *args: Any) -> Any:
    """One Ray task: the chunk's result and the node it ran on."""
    import ray

    return ray.get_runtime_context().get_node_id(), func(*args)


def _one_line(text: Any, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _dialled_address(ray: Any, address: str) -> str:
    """The address Ray will dial for ``address``: Ray replaces a loopback host by
    this machine's IP (its own rule), so a cluster listening on 127.0.0.1 only is
    not where ``ray.init`` looks."""
    try:
        from ray._private.services import canonicalize_bootstrap_address  # not public: fall back to the text
    except ImportError:
        return address
    try:
        return canonicalize_bootstrap_address(address) or address
    except Exception:  # noqa: BLE001 - only a better error message depends on it
        return address


def _check_reachable(ray: Any, address: str, timeout: float) -> None:
    """ConnectionError ``<what> -- <fix>`` unless a TCP connection to the address
    Ray will dial opens within ``timeout`` seconds."""
    from ..federation.address import parse_address

    dialled = _dialled_address(ray, address)
    host, port = parse_address(dialled, "Ray address")
    shown = address if dialled == address else f"{address} (Ray dials {dialled} for it)"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        fix = "start the cluster there (`ray start --head --port=PORT` on the head machine) or correct the address"
        if dialled != address:
            fix += (f" (Ray replaces a loopback address by {dialled.rpartition(':')[0]}: a head started with "
                    "--node-ip-address=127.0.0.1 cannot be reached this way, start it on this machine's address)")
        raise ConnectionError(f"no Ray cluster answers at {shown}: {_one_line(exc.strerror or exc)} -- {fix}") \
            from None


def _check_address(address: Any) -> Optional[str]:
    if address is None or address == "auto":
        return address
    from ..federation.address import parse_address

    if not isinstance(address, str):
        raise TypeError(f"address must be None, 'auto' or a 'HOST:PORT' string, got {type(address).__name__}")
    if address.startswith("ray://"):
        raise ValueError(f"address {address!r} is a Ray Client address -- give the head node's GCS address "
                         "HOST:PORT (6379 for `ray start --head`) and run the party on a machine of the cluster")
    parse_address(address, "Ray address")
    return address


class RayExecutor(Executor):
    """HE vector work as Ray tasks over row shards (module docstring).

    Parameters
    ----------
    address : None (a Ray instance of this executor's own on this machine,
        unless Ray is initialised already), ``"auto"`` or the head node's
        ``"HOST:PORT"``.
    num_cpus : how many CPUs of the cluster the work is split for (None: every
        CPU of the cluster's live nodes, looked up per operation); for a Ray
        instance of its own, also how many CPUs it gets.
    max_retries : how often a task whose worker or node died is run again
        (Ray's task retry; 0 fails the job on the first loss).
    timeout_s : None (no limit) or the seconds one operation may take before it
        fails (RuntimeError, its tasks cancelled).
    connect_timeout_s : the seconds the address check waits for an answer.

    ``task_counts`` counts the tasks that ran on each node (by Ray node ID) since
    the executor was made; ``cluster_address`` is the GCS address it is connected to.
    """

    ships_arguments = True

    def __init__(self, address: Optional[str] = None, num_cpus: Optional[int] = None, *, max_retries: int = 3,
                 timeout_s: Optional[float] = None, connect_timeout_s: float = 10.0):
        self.address = _check_address(address)
        self.num_cpus = None if num_cpus is None else check_positive_int(num_cpus, "num_cpus")
        self.max_retries = check_positive_int(max_retries, "max_retries", minimum=0)
        self.timeout_s = None if timeout_s is None else check_real(timeout_s, "timeout_s", low=0.0,
                                                                      low_inclusive=False)
        self.connect_timeout_s = check_real(connect_timeout_s, "connect_timeout_s", low=0.0, low_inclusive=False)
        self.task_counts: collections.Counter = collections.Counter()
        self.cluster_address: Optional[str] = None
        self._counts_lock = threading.Lock()
        self._remote: Any = None
        self._owns_connection = False
        self._connect()

    # -- the connection ----------------------------------------------------
    def _connect(self) -> Any:
        ray = _import_ray()
        with _connect_lock:
            if self._remote is not None and ray.is_initialized():
                return ray
            if not ray.is_initialized():
                if self.address is None:
                    ray.init(address="local", num_cpus=self.num_cpus, include_dashboard=False)
                else:
                    if self.address != "auto":
                        _check_reachable(ray, self.address, self.connect_timeout_s)
                    try:
                        ray.init(address=self.address)
                    except Exception as exc:  # noqa: BLE001 - Ray raises RuntimeError, ConnectionError, ...
                        raise ConnectionError(
                            f"connecting to the Ray cluster at address {self.address!r} failed: {_one_line(exc)} "
                            "-- start the cluster (`ray start --head`) with this machine's Ray and Python versions, "
                            "or correct the address") from None
                self._owns_connection = True
            self.cluster_address = ray.get_runtime_context().gcs_address
            self._remote = ray.remote(_run_chunk).options(
                num_cpus=1, max_retries=self.max_retries, retry_exceptions=False, scheduling_strategy="SPREAD")
        return ray

    def close(self) -> None:
        """Disconnect: ``ray.shutdown()`` if this executor called ``ray.init`` (module
        docstring), else nothing. A later operation connects again."""
        ray = _import_ray()
        with _connect_lock:
            if self._owns_connection and ray.is_initialized():
                ray.shutdown()
            self._owns_connection = False
            self._remote = None

    # -- the work ----------------------------------------------------------
    @property
    def n_workers(self) -> int:
        if self.num_cpus is not None:
            return self.num_cpus
        ray = self._connect()
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def _submit(self, func: Callable[..., Any], args: tuple) -> Any:
        """One task (its ObjectRef): ``func(*args)`` on a node of the cluster."""
        return self._remote.remote(func, *args)

    def map_chunks(self, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> List[Any]:
        if is_local_only(func):
            raise ValueError(f"{getattr(func, '__name__', func)!r} takes key material: it runs only in this "
                             "party's own processes, never on Ray workers")
        ray = self._connect()
        alive = self._alive_nodes(ray)
        refs = [self._submit(func, tuple(args)) for args in args_per_chunk]
        try:
            outputs = self._wait(ray, refs, func, alive)
        except BaseException:
            for ref in refs:
                try:
                    ray.cancel(ref)
                except Exception:  # noqa: BLE001 - finished or already gone
                    pass
            raise
        with self._counts_lock:
            self.task_counts.update(node for node, _ in outputs)
        return [value for _, value in outputs]

    def _wait(self, ray: Any, refs: List[Any], func: Callable[..., Any], alive: Dict[str, str]) -> List[Any]:
        """The tasks' outputs in order; RuntimeError (one line) for a lost job, an
        exhausted cluster or the timeout; the chunk function's own exception as it is."""
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        done: Dict[int, Any] = {}
        index = {ref: i for i, ref in enumerate(refs)}
        pending = list(refs)
        while pending:
            wait = _POLL_S if deadline is None else max(0.0, min(_POLL_S, deadline - time.monotonic()))
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=wait)
            for ref in ready:
                try:
                    done[index[ref]] = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, BaseException):
                        raise cause from None
                    raise RuntimeError(self._failure(ray, func, _one_line(exc), alive, wait_for_death=False)) \
                        from None
                except ray.exceptions.RayError as exc:
                    raise RuntimeError(self._failure(ray, func, _one_line(exc), alive, wait_for_death=True)) \
                        from None
            if not pending:
                break
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(self._failure(ray, func, f"not finished within timeout_s={self.timeout_s:g} s "
                                                 f"({len(pending)} of {len(refs)} tasks left)", alive,
                                                 wait_for_death=False))
            if ray.cluster_resources().get("CPU", 0) <= 0:
                raise RuntimeError(self._failure(ray, func, f"no live node with a CPU is left to run the "
                                                 f"{len(pending)} remaining tasks", alive, wait_for_death=True))
        return [done[i] for i in range(len(refs))]

    @staticmethod
    def _alive_nodes(ray: Any) -> Dict[str, str]:
        """``{node ID: its IP}`` of the live nodes."""
        return {node["NodeID"]: node.get("NodeManagerAddress", "?") for node in ray.nodes() if node.get("Alive")}

    def _failure(self, ray: Any, func: Callable[..., Any], reason: str, alive: Dict[str, str], *,
                 wait_for_death: bool) -> str:
        """The one line a failed job raises: what failed, where, which nodes died, the fix."""
        dead: Set[str] = set()
        give_up = time.monotonic() + (_DEATH_REPORT_S if wait_for_death else 0.0)
        while True:  # the cluster notices a dead node within its health-check period
            try:
                dead = set(alive) - set(self._alive_nodes(ray))
            except Exception:  # noqa: BLE001 - the message is still useful without it
                break
            if dead or time.monotonic() >= give_up:
                break
            time.sleep(_POLL_S)
        died = ("; nodes that died during the job: " + ", ".join(f"{node} ({alive[node]})" for node in sorted(dead))
                if dead else "")
        name = getattr(func, "__name__", repr(func))
        return (f"Ray job {name} on the cluster at {self.cluster_address} failed: {_one_line(reason)}{died} -- "
                f"each lost task is retried {self.max_retries} times on other nodes: bring the nodes back or add "
                "nodes (or raise max_retries / timeout_s) and run it again")

    # -- identity ----------------------------------------------------------
    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r}, num_cpus={self.num_cpus!r})"

    def __copy__(self) -> "RayExecutor":
        return self  # a handle on a cluster, not a value (scikit-learn's clone copies parameters)

    def __deepcopy__(self, memo: Any) -> "RayExecutor":
        return self

    def __reduce__(self) -> Any:
        # In another process: the same cluster (joined, not started again), the same settings.
        return (_restore, (self.cluster_address or self.address, self.num_cpus, self.max_retries, self.timeout_s,
                           self.connect_timeout_s))


def _restore(address: Optional[str], num_cpus: Optional[int], max_retries: int, timeout_s: Optional[float],
             connect_timeout_s: float) -> RayExecutor:
    return RayExecutor(address, num_cpus, max_retries=max_retries, timeout_s=timeout_s,
                       connect_timeout_s=connect_timeout_s)
