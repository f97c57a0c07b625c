"""A party's HE vector work as Ray tasks: :class:`RayExecutor`.

Each chunk of an operation (:mod:`vflsec.he.executor`) is one Ray task that
needs one CPU, placed on the cluster's CPUs in turn: one chunk per CPU of the
cluster (:meth:`RayExecutor.chunk_bounds`), each chunk on the next CPU slot of
the live nodes (a node with k CPUs takes k slots of the turn; the turn goes on
from one operation to the next, so one-chunk operations alternate nodes). Ray's
SPREAD strategy is best effort and could put every chunk on one node; a
placement is soft (a node that died or cannot run the task leaves it to Ray,
so a retried task goes elsewhere). An operation too small to
repay a task's cost stays in this process (:meth:`RayExecutor.task_items`);
a vector-matrix product is split into blocks of columns, and of rows when
there are fewer columns than CPUs (the caller multiplies a column's row
shards together). An argument that several tasks of an operation share (the
ciphertexts of a product split by columns) goes to the object store once.
The cluster is the party's own: cross-party traffic stays on the party's
gRPC/mTLS transport, and every node needs the same vflsec (and phe, gmpy2)
installed. What a task gets is the public modulus, the public DJN base and
plain integers (module docstring of :mod:`vflsec.he.executor`); decryption
never goes to Ray, and a chunk function marked
:func:`~vflsec.he.executor.local_only` is refused.

Work started without waiting (:meth:`RayExecutor.submit_chunks`: the offline
randomizers of :class:`vflsec.he.RandomnessStream`) runs as the same tasks; its
round trip is not on anybody's path, so it is counted apart from the operations
this process waited for (``background_operations``, ``background_tasks``).

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
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from .._arrays import check_positive_int, check_real
from .executor import Executor, PendingChunks, even_bounds, is_local_only

__all__ = ["RayExecutor"]

# While a job runs, its pending tasks and the cluster's nodes are looked at this often.
_POLL_S = 0.5
# An operation through Ray costs 3-5 ms beyond its work with nothing to ship, 20-60 ms with
# 2500 ciphertexts each way per task (2 one-CPU nodes on 127.0.0.1, 2048-bit keys): it leaves
# this process only with 64 times the smallest chunk the local pool takes, e.g. 256 Paillier
# encryptions (about 16 ms of work) or 4096 rows x columns of a product.
_TASK_ITEMS_FACTOR = 64
# An argument that several tasks of one operation share (the same object) goes to the object
# store once when it has at least this many entries (a few small ones travel inline, cheaper).
_SHARED_MIN_LEN = 64
# How many operations ``RayExecutor.timeline`` keeps (the oldest are dropped).
_TIMELINE_OPERATIONS = 100_000
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
    """One Ray task: the node and worker it ran on, when the chunk's work began and ended
    (``time.time()`` of the node) and the chunk's result."""
    import ray

    context = ray.get_runtime_context()
    start = time.time()
    value = func(*args)
    return context.get_node_id(), context.get_worker_id(), start, time.time(), value


def _one_line(text: Any, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


class _RayPending(PendingChunks):
    def __init__(self, executor: "RayExecutor", ray: Any, refs: List[Any], func: Callable[..., Any],
                 alive: Dict[str, str]):
        self._executor, self._ray, self._refs, self._func, self._alive = executor, ray, refs, func, alive

    def result(self) -> List[Any]:
        return self._executor._finish(self._ray, self._refs, self._func, self._alive, None)

    def cancel(self) -> None:
        for ref in self._refs:
            try:
                self._ray.cancel(ref)
            except Exception:  # noqa: BLE001 - finished or already gone
                pass


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


def _cpu_slots(nodes: Sequence[Dict[str, Any]]) -> List[str]:
    """The CPU slots of ``nodes`` (``ray.nodes()`` entries): a turn over the nodes (by ID) for each
    CPU, a node with k CPUs in the first k turns."""
    cpus = {node["NodeID"]: int(node.get("Resources", {}).get("CPU", 0)) for node in nodes}
    return [node for turn in range(max(cpus.values(), default=0)) for node, count in sorted(cpus.items())
            if count > turn]


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
    """HE vector work as Ray tasks over blocks of rows and columns (module docstring).

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
    the executor was made, ``operations`` the operations (``map_chunks`` calls) they
    came from; ``timeline`` holds, for the last 100000 operations, ``(submitted,
    done, tasks)`` with ``(worker ID, start, end)`` per task, in ``time.time()``
    seconds (the tasks' on their nodes' clocks), from which the time an operation
    spent beyond its tasks' work follows (:mod:`vflsec.bench.experiments.scale`
    measures it); ``background_operations`` counts the operations started with
    :meth:`submit_chunks` (work that ran while this process went on, e.g. offline
    randomizers), ``background_tasks`` holds their tasks' ``(worker ID, start, end)``
    (workers they held); ``cluster_address`` is the GCS address it is connected to.
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
        self.operations = 0
        self.timeline: collections.deque = collections.deque(maxlen=_TIMELINE_OPERATIONS)
        self.background_operations = 0
        self.background_tasks: collections.deque = collections.deque(maxlen=_TIMELINE_OPERATIONS)
        self.cluster_address: Optional[str] = None
        self._counts_lock = threading.Lock()
        self._next_slot = 0  # the CPU slot the next chunk goes to (module docstring)
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
            self._remote = ray.remote(_run_chunk)
        return ray

    def connect(self) -> Any:
        """The ``ray`` module, connected to this executor's cluster (connecting as an operation
        would): for work beyond ``map_chunks`` on the same cluster (the PSI buckets of
        :mod:`vflsec.federation.psi_workers`)."""
        return self._connect()

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

    def chunk_bounds(self, n_items: int, workers: int, min_chunk: int) -> List[Tuple[int, int]]:
        """One chunk per worker, of equal sizes (the local pool makes two per worker so a slow
        worker does not leave the others idle; a Ray task costs more than a pool round trip,
        and the parties' operations run at the same time, which keeps the CPUs busy)."""
        return even_bounds(n_items, min(workers, max(1, n_items // max(1, min_chunk))))

    def task_items(self, min_chunk: int) -> int:
        return min_chunk * _TASK_ITEMS_FACTOR

    def _submit(self, func: Callable[..., Any], args: tuple, node: Optional[str] = None) -> Any:
        """One task (its ObjectRef): ``func(*args)`` on ``node`` if it can run there, else (or
        None) where Ray's SPREAD puts it (an ObjectRef among the arguments: Ray hands the task
        its value)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        where = "SPREAD" if node is None else NodeAffinitySchedulingStrategy(node, soft=True)
        return self._remote.options(num_cpus=1, max_retries=self.max_retries, retry_exceptions=False,
                                    scheduling_strategy=where).remote(func, *args)

    def next_nodes(self, count: int) -> List[Optional[str]]:
        """The nodes the next ``count`` tasks go to (the CPU slots in turn, module docstring;
        None: no live node has a CPU, Ray decides), for work beyond ``map_chunks`` on the same
        cluster that takes the same turn (the PSI server buckets of
        :mod:`vflsec.federation.psi_workers`)."""
        ray = self._connect()
        return self._placements([node for node in ray.nodes() if node.get("Alive")], count)

    def cpu_slots(self) -> List[str]:
        """The live nodes' CPU slots: node IDs in turn, each node as often as it has CPUs (empty:
        no live node has a CPU)."""
        ray = self._connect()
        return _cpu_slots([node for node in ray.nodes() if node.get("Alive")])

    def _placements(self, nodes: Sequence[Dict[str, Any]], n_chunks: int) -> List[Optional[str]]:
        """The node of each of ``n_chunks`` chunks: the live nodes' CPU slots in turn, going on
        from where the last operation stopped (module docstring); None for all without a CPU."""
        slots = _cpu_slots(nodes)
        if not slots:
            return [None] * n_chunks
        with self._counts_lock:
            first, self._next_slot = self._next_slot, self._next_slot + n_chunks
        return [slots[(first + i) % len(slots)] for i in range(n_chunks)]

    def _put(self, value: Any) -> Any:
        """``value`` in the object store (its ObjectRef), for the tasks that share it."""
        return _import_ray().put(value)

    def _shared_once(self, args_per_chunk: Sequence[tuple]) -> List[tuple]:
        """The chunks' arguments with each list or bytes object that several chunks share
        (the same object, e.g. the ciphertexts every column group of a ``dot`` takes) replaced
        by one ObjectRef: it is serialized once and each node fetches it once, instead of
        once per task."""
        uses = collections.Counter(id(a) for args in args_per_chunk for a in args
                                   if isinstance(a, (list, bytes)) and len(a) >= _SHARED_MIN_LEN)
        refs: Dict[int, Any] = {}
        out = []
        for args in args_per_chunk:
            chunk = []
            for a in args:
                if uses.get(id(a), 0) > 1:
                    if id(a) not in refs:
                        refs[id(a)] = self._put(a)
                    a = refs[id(a)]
                chunk.append(a)
            out.append(tuple(chunk))
        return out

    def _start(self, func: Callable[..., Any],
               args_per_chunk: Sequence[tuple]) -> Tuple[Any, List[Any], Dict[str, str]]:
        """The chunks submitted: ``(ray, their ObjectRefs, the live nodes then)``."""
        if is_local_only(func):
            raise ValueError(f"{getattr(func, '__name__', func)!r} takes key material: it runs only in this "
                             "party's own processes, never on Ray workers")
        ray = self._connect()
        nodes = [node for node in ray.nodes() if node.get("Alive")]
        alive = {node["NodeID"]: node.get("NodeManagerAddress", "?") for node in nodes}
        chunks = self._shared_once(args_per_chunk)
        return ray, [self._submit(func, args, node)
                     for args, node in zip(chunks, self._placements(nodes, len(chunks)))], alive

    def _finish(self, ray: Any, refs: List[Any], func: Callable[..., Any], alive: Dict[str, str],
                submitted: Optional[float]) -> List[Any]:
        """The chunks' results (:meth:`_wait`), their tasks counted; ``submitted``: when the caller
        began waiting for them (an operation of the timeline), None for one submitted earlier
        that ran in the background (its tasks go to ``background_tasks``)."""
        try:
            outputs = self._wait(ray, refs, func, alive)
        except BaseException:
            for ref in refs:
                try:
                    ray.cancel(ref)
                except Exception:  # noqa: BLE001 - finished or already gone
                    pass
            raise
        done = time.time()
        tasks = tuple((worker, start, end) for _, worker, start, end, _ in outputs)
        with self._counts_lock:
            self.task_counts.update(node for node, *_ in outputs)
            if submitted is None:
                self.background_operations += 1
                self.background_tasks.extend(tasks)
            else:
                self.operations += 1
                self.timeline.append((submitted, done, tasks))
        return [value for *_, value in outputs]

    def map_chunks(self, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> List[Any]:
        submitted = time.time()
        ray, refs, alive = self._start(func, args_per_chunk)
        return self._finish(ray, refs, func, alive, submitted)

    def submit_chunks(self, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> PendingChunks:
        """The chunks' tasks submitted now; ``result()`` waits for them as :meth:`map_chunks` does
        (same failures). They count in ``task_counts`` and ``background_operations``, their
        tasks' times in ``background_tasks``, not in ``operations`` and ``timeline`` (nobody
        waited for them as they ran)."""
        ray, refs, alive = self._start(func, args_per_chunk)
        return _RayPending(self, ray, refs, func, alive)

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
