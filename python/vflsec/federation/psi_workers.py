"""The work of one PSI bucket, and where a party runs it: its threads or its Ray cluster.

One bucket of :func:`vflsec.federation.psi.align_ids` is one two-party ECDH PSI instance of
``openmined-psi`` (P-256): the client (the leader) blinds the bucket's IDs with a fresh secret
key (:func:`psi_client_request`), the server (a member) answers with a fresh key of its own
(:func:`psi_server_reply`), and the client, with the same key, finds which of its IDs the server
holds (:func:`psi_client_intersection`). A key object of the library cannot be pickled (TypeError),
so no code path can ship one by accident; what follows says what is shipped instead.

:class:`BucketWorkers` is where the buckets run: ``blind`` (the client's request), ``intersect``
(the client's result for the member's reply) and ``reply`` (the server's answer), each giving a
pending result (``done()``, ``result()``). Two kinds, chosen by :func:`bucket_workers` from the
party's executor (:mod:`vflsec.he.executor`):

* :class:`ThreadBucketWorkers` (no executor, a local pool or any other executor but Ray's): this
  process's threads; openmined-psi releases the GIL, so they use the machine's cores.
* :class:`RayBucketWorkers` (a :class:`~vflsec.he.RayExecutor`): the party's own Ray cluster.
  A server bucket is a stateless Ray task ``(the bucket's IDs, request bytes) -> (setup bytes,
  response bytes)``: its key is made inside the task and dies with it, it goes to the executor's
  next CPU slot (:meth:`~vflsec.he.RayExecutor.next_nodes`), and a task whose worker or node dies
  is run again elsewhere (the executor's ``max_retries``). A client bucket's key must
  live from the request until the reply comes back, so client buckets run on Ray actors, one per
  worker (the cluster's CPUs unless ``workers`` says otherwise), placed on the nodes in turn, each
  as often as it has CPUs (an actor holds no CPU while it waits, so the cluster's tasks still run).
  Bucket k goes to actor ``k mod workers``, which makes its key, keeps it, returns only the request
  bytes, and later takes the reply bytes and returns the indices of the bucket's IDs the member holds
  (an int64 array). The key never leaves the actor process. The actors are killed when
  ``align_ids`` ends, also on error. What Ray serializes for PSI is therefore the party's own IDs
  of a bucket (a list of str), the bytes that go to the peer or came from it over the party's
  transport, index arrays, bucket numbers and, for the record of where the work ran, node IDs
  and process IDs (``tests/federation/test_psi_ray.py`` checks every argument and result).

Failures on Ray. An exception of the PSI work itself (a malformed reply) comes back as itself. An
actor that dies loses the keys of its buckets under way, so the run cannot continue: the wait for
it ends with a RuntimeError of one line naming the actor's node and the nodes that died since the
run began; a server task lost beyond its retries, a cluster with no CPU left, or a wait past the
executor's ``timeout_s`` ends the same way. Every wait polls, so none is without a bound while
Ray reports deaths (a node's within its health-check period).
"""
from __future__ import annotations

import collections
import os
import threading
import time
import weakref
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["BucketWorkers", "RayBucketWorkers", "ThreadBucketWorkers", "bucket_counts", "bucket_workers",
           "psi_client_intersection", "psi_client_request", "psi_server_reply"]

#: most threads a party blinds on by default (its cores, up to this)
MAX_DEFAULT_THREADS = 8
# While a Ray result is awaited, the cluster is looked at this often.
_POLL_S = 0.5
# After a Ray failure, how long to wait for the cluster to report which node died.
_DEATH_REPORT_S = 10.0


def _psi():
    try:
        import private_set_intersection.python as psi
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("entity alignment needs openmined-psi (pip install 'vflsec[net]')") from exc
    return psi


def psi_client_request(ids: Sequence[str]):
    """``(client, request_bytes)``: a fresh client key and the blinded items."""
    psi = _psi()
    client = psi.client.CreateWithNewKey(True)
    return client, client.CreateRequest(list(ids)).SerializeToString()


def psi_server_reply(ids: Sequence[str], request: bytes) -> Tuple[bytes, bytes]:
    """The server's ``(setup, response)`` bytes for a client's request."""
    psi = _psi()
    req = psi.Request()
    try:
        req.ParseFromString(bytes(request))
    except Exception as exc:  # protobuf's DecodeError
        raise ValueError(f"malformed PSI request: {exc}") from None
    server = psi.server.CreateWithNewKey(True)
    setup = server.CreateSetupMessage(0.0, len(req.encrypted_elements), list(ids), psi.DataStructure.RAW)
    response = server.ProcessRequest(req)
    return setup.SerializeToString(), response.SerializeToString()


def psi_client_intersection(client, setup: bytes, response: bytes) -> List[int]:
    """Indices (into the client's request items) of the items the server holds."""
    psi = _psi()
    server_setup, server_response = psi.ServerSetup(), psi.Response()
    try:
        server_setup.ParseFromString(bytes(setup))
        server_response.ParseFromString(bytes(response))
    except Exception as exc:
        raise ValueError(f"malformed PSI reply: {exc}") from None
    return sorted(int(i) for i in client.GetIntersection(server_setup, server_response))


def _indices(found: List[int]) -> np.ndarray:
    return np.asarray(found, dtype=np.int64)


def thread_count(workers: Optional[int]) -> int:
    """``workers`` checked (an int >= 1), or for None this process's cores, at most
    :data:`MAX_DEFAULT_THREADS`."""
    if workers is None:
        try:
            return max(1, min(MAX_DEFAULT_THREADS, len(os.sched_getaffinity(0))))
        except AttributeError:  # not on Linux
            return max(1, min(MAX_DEFAULT_THREADS, os.cpu_count() or 1))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    return workers


class BucketWorkers(ABC):
    """Where a party's PSI buckets are computed (module docstring). ``ids`` arguments are
    callables that make the bucket's IDs (a list of str) where the work needs them; ``key``
    names a client bucket from its request to its result (one key per bucket under way).
    Every method returns a pending result with ``done()`` and ``result()``."""

    #: how many buckets are computed at once
    n_workers: int

    @abstractmethod
    def blind(self, key: int, ids: Callable[[], List[str]]) -> Any:
        """The client's request bytes for a bucket; its key is kept for :meth:`intersect`."""

    @abstractmethod
    def intersect(self, key: int, setup: bytes, response: bytes) -> Any:
        """The sorted indices (int64 array) of bucket ``key``'s IDs that the server holds; its key is dropped."""

    @abstractmethod
    def reply(self, ids: Callable[[], List[str]], request: bytes) -> Any:
        """The server's ``(setup, response)`` bytes for a bucket, with a key of its own."""

    @abstractmethod
    def close(self) -> None:
        """Release the workers (and every key they still hold)."""


class ThreadBucketWorkers(BucketWorkers):
    """This process's threads (``threads`` of them); the client keys live in this process."""

    def __init__(self, threads: int):
        self.n_workers = threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="vflsec-psi")
        self._clients: Dict[int, Any] = {}

    def blind(self, key: int, ids: Callable[[], List[str]]) -> Any:
        return self._pool.submit(self._blind, key, ids)

    def _blind(self, key: int, ids: Callable[[], List[str]]) -> bytes:
        client, request = psi_client_request(ids())
        self._clients[key] = client
        return request

    def intersect(self, key: int, setup: bytes, response: bytes) -> Any:
        return self._pool.submit(self._intersect, key, setup, response)

    def _intersect(self, key: int, setup: bytes, response: bytes) -> np.ndarray:
        return _indices(psi_client_intersection(self._clients.pop(key), setup, response))

    def reply(self, ids: Callable[[], List[str]], request: bytes) -> Any:
        return self._pool.submit(lambda: psi_server_reply(ids(), request))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._clients.clear()


# -- Ray ---------------------------------------------------------------------------------------------

class ClientBuckets:
    """A Ray actor's state: the client keys of the buckets it blinded and has not yet
    intersected. Only request bytes and index arrays leave it."""

    def __init__(self) -> None:
        self._clients: Dict[int, Any] = {}

    def where(self) -> Tuple[str, int]:
        """The actor's node (Ray node ID) and process ID."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def blind(self, key: int, ids: List[str]) -> bytes:
        client, request = psi_client_request(ids)
        self._clients[key] = client
        return request

    def intersect(self, key: int, setup: bytes, response: bytes) -> np.ndarray:
        return _indices(psi_client_intersection(self._clients.pop(key), setup, response))


def server_bucket(ids: List[str], request: bytes) -> Tuple[str, bytes, bytes]:
    """A Ray task: the node it ran on and the server's ``(setup, response)`` bytes."""
    import ray

    setup, response = psi_server_reply(ids, request)
    return ray.get_runtime_context().get_node_id(), setup, response


_counts: "weakref.WeakKeyDictionary[Any, collections.Counter]" = weakref.WeakKeyDictionary()
_counts_lock = threading.Lock()


def bucket_counts(executor: Any) -> Dict[str, int]:
    """PSI bucket operations (blind, intersect, reply) that ran on each node of ``executor``'s
    Ray cluster (by Ray node ID) since it was made; ``{}`` for an executor that ran none."""
    if executor is None:
        return {}
    with _counts_lock:
        return dict(_counts.get(executor, {}))


def _count(executor: Any, node: str) -> None:
    with _counts_lock:
        _counts.setdefault(executor, collections.Counter())[node] += 1


def _one_line(text: Any, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


class _Pending:
    """A Ray result awaited through :meth:`RayBucketWorkers._get`, then ``then(value)``."""

    def __init__(self, workers: "RayBucketWorkers", ref: Any, what: str, then: Callable[[Any], Any],
                 actor: Optional[int] = None):
        self._workers, self._ref, self._what, self._then, self._actor = workers, ref, what, then, actor

    def done(self) -> bool:
        ready, _ = self._workers._ray.wait([self._ref], timeout=0)
        return bool(ready)

    def result(self) -> Any:
        return self._then(self._workers._get(self._ref, self._what, self._actor))


class RayBucketWorkers(BucketWorkers):
    """PSI buckets on the Ray cluster of ``executor`` (a :class:`~vflsec.he.RayExecutor`):
    server buckets as stateless tasks, client buckets on ``workers`` actors (None: one per CPU
    of the cluster, or the executor's ``num_cpus``) made on first use (module docstring)."""

    def __init__(self, executor: Any, workers: Optional[int] = None):
        self.executor = executor
        self._ray = executor.connect()
        self.n_workers = thread_count(workers) if workers is not None else executor.n_workers
        self._alive = self._alive_nodes()  # to name the nodes that die during the run
        self._actor_class = self._ray.remote(ClientBuckets)
        self._server_function = self._ray.remote(server_bucket)
        self.actors: List[Any] = []
        self._placements: List[Any] = []  # each actor's where() (ObjectRef, then its value)
        self._slots: Optional[List[str]] = None  # the node of each actor in turn

    # -- what Ray serializes goes through these two ------------------------------------------------
    def _submit(self, remote: Any, *args: Any) -> Any:
        """``remote.remote(*args)``: a task or actor call (its ObjectRef)."""
        return remote.remote(*args)

    def _fetched(self, value: Any) -> Any:
        """A result as it came back from Ray."""
        return value

    # -- the work ------------------------------------------------------------------------------------
    def _actor(self, key: int) -> int:
        index = key % self.n_workers
        while len(self.actors) <= index:
            actor = self._actor_class.options(max_restarts=0, max_task_retries=0,
                                              scheduling_strategy=self._node_for(len(self.actors))).remote()
            self.actors.append(actor)
            self._placements.append(self._submit(actor.where))
        return index

    def _node_for(self, index: int) -> Any:
        """Where actor ``index`` goes: the live nodes with CPUs in turn, each as often as it has CPUs
        (Ray's SPREAD is best effort and can put two actors on one node of an idle cluster); soft, so
        a node gone meanwhile leaves the choice to Ray."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self._slots is None:
            self._slots = self.executor.cpu_slots()
        if not self._slots:
            return "SPREAD"
        return NodeAffinitySchedulingStrategy(self._slots[index % len(self._slots)], soft=True)

    def placement(self, index: int) -> Tuple[str, int]:
        """``(node ID, process ID)`` of client actor ``index``."""
        where = self._placements[index]
        if not isinstance(where, tuple):
            where = self._placements[index] = tuple(self._get(where, f"starting PSI actor {index}", index))
        return where

    def _counted(self, index: int) -> Callable[[Any], Any]:
        def then(value: Any) -> Any:
            _count(self.executor, self.placement(index)[0])
            return value
        return then

    def blind(self, key: int, ids: Callable[[], List[str]]) -> Any:
        index = self._actor(key)
        ref = self._submit(self.actors[index].blind, key, ids())
        return _Pending(self, ref, f"blinding PSI bucket {key}", self._counted(index), index)

    def intersect(self, key: int, setup: bytes, response: bytes) -> Any:
        index = self._actor(key)
        ref = self._submit(self.actors[index].intersect, key, setup, response)
        return _Pending(self, ref, f"intersecting PSI bucket {key}", self._counted(index), index)

    def reply(self, ids: Callable[[], List[str]], request: bytes) -> Any:
        def then(value: Tuple[str, bytes, bytes]) -> Tuple[bytes, bytes]:
            node, setup, response = value
            _count(self.executor, node)
            return setup, response
        return _Pending(self, self._submit(self._server_task(), ids(), request), "answering a PSI bucket", then)

    def _server_task(self) -> Any:
        """The remote function of the next server bucket, placed on the executor's next CPU slot (the turn
        its HE tasks take: Ray's SPREAD is best effort); soft, so a node gone leaves the choice to Ray."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node = self.executor.next_nodes(1)[0]
        where = "SPREAD" if node is None else NodeAffinitySchedulingStrategy(node, soft=True)
        return self._server_function.options(num_cpus=1, scheduling_strategy=where,
                                             max_retries=self.executor.max_retries, retry_exceptions=False)

    def close(self) -> None:
        """Kill the client actors (their keys with them)."""
        actors, self.actors = self.actors, []
        for actor in actors:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - dead already or the cluster gone: nothing left to release
                pass

    # -- waiting, and failing in one line ------------------------------------------------------------
    def _get(self, ref: Any, what: str, actor: Optional[int]) -> Any:
        ray = self._ray
        timeout_s = self.executor.timeout_s
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            wait = _POLL_S if deadline is None else max(0.0, min(_POLL_S, deadline - time.monotonic()))
            ready, _ = ray.wait([ref], timeout=wait)
            if ready:
                try:
                    return self._fetched(ray.get(ref))
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, Exception) and not isinstance(cause, ray.exceptions.RayError):
                        raise cause from None  # the PSI work's own error (a malformed reply), as it is
                    raise RuntimeError(self._failure(what, _one_line(exc), actor)) from None
                except ray.exceptions.RayError as exc:
                    # A dead actor's error says why it died; any other loss (an actor "temporarily
                    # unavailable", a task's worker gone): wait for the cluster to say which node died.
                    known = isinstance(exc, ray.exceptions.ActorDiedError)
                    raise RuntimeError(self._failure(what, _one_line(exc), actor, wait_for_death=not known)) \
                        from None
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(self._failure(what, f"not finished within timeout_s={timeout_s:g} s", actor,
                                                 wait_for_death=False))
            if ray.cluster_resources().get("CPU", 0) <= 0:
                raise RuntimeError(self._failure(what, "no live node with a CPU is left", actor))

    def _alive_nodes(self) -> Dict[str, str]:
        return {node["NodeID"]: node.get("NodeManagerAddress", "?") for node in self._ray.nodes() if node.get("Alive")}

    def _failure(self, what: str, reason: str, actor: Optional[int], *, wait_for_death: bool = True) -> str:
        """The one line a failed run raises: what failed, on which node, which nodes died, the fix."""
        dead: Dict[str, str] = {}
        give_up = time.monotonic() + (_DEATH_REPORT_S if wait_for_death else 0.0)
        while True:  # the cluster notices a dead node within its health-check period
            try:
                alive = self._alive_nodes()
            except Exception:  # noqa: BLE001 - the message is still useful without it
                break
            dead = {node: ip for node, ip in self._alive.items() if node not in alive}
            if dead or time.monotonic() >= give_up:
                break
            time.sleep(_POLL_S)
        where = ""
        if actor is not None:
            placed = self._placements[actor] if actor < len(self._placements) else None
            if placed is not None and not isinstance(placed, tuple):
                try:  # it answered before it died: its answer is kept by this process
                    placed = tuple(self._ray.get(placed, timeout=1.0))
                except Exception:  # noqa: BLE001 - it died first: the message says so
                    pass
            if isinstance(placed, tuple):
                node, pid = placed
                where = f" in PSI actor {actor} (process {pid} on node {node} ({self._alive.get(node, '?')}))"
            else:
                where = f" in PSI actor {actor} (before it reported its node)"
        died = ("; nodes that died during the run: " + ", ".join(f"{node} ({ip})" for node, ip in sorted(dead.items()))
                if dead else "")
        return (f"PSI bucket work on the Ray cluster at {self.executor.cluster_address} failed: {what}{where}: "
                f"{_one_line(reason)}{died} -- a lost client actor takes its buckets' keys with it, so the run "
                "cannot go on: look at that node (its memory, its Ray logs), bring it back or set [compute] "
                "engine = \"local\", and run the job again")


def bucket_workers(executor: Any, workers: Optional[int]) -> BucketWorkers:
    """The workers for ``executor``, a party's executor of :mod:`vflsec.he.executor` (None for
    none): Ray's for one that runs on a Ray cluster (it has ``connect()``, which gives the
    connected ``ray`` module: :class:`~vflsec.he.RayExecutor`), else this process's threads
    (``workers`` of them, default its cores up to 8). The executor is known by its interface
    (``map_chunks``, ``n_workers``): :mod:`vflsec.federation` sits below :mod:`vflsec.he` and
    does not import it. TypeError for anything else."""
    if executor is None:
        return ThreadBucketWorkers(thread_count(workers))
    if not callable(getattr(executor, "map_chunks", None)) or not hasattr(executor, "n_workers"):
        raise TypeError(f"executor must be None or a vflsec.he.Executor (LocalPoolExecutor, RayExecutor), got "
                        f"{type(executor).__name__}")
    if callable(getattr(executor, "connect", None)):
        return RayBucketWorkers(executor, workers)
    return ThreadBucketWorkers(thread_count(workers))
