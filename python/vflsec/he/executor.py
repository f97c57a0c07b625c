"""Where a party's heavy HE vector work runs: the executor interface.

The Paillier vector operations (encryption, the offline randomizers, the
encrypted products ``mul_plain`` / ``dot``, re-randomization) split their rows
into chunks and hand them to an :class:`Executor` as ``map_chunks(func,
args_per_chunk)``: ``[func(*args) for args in args_per_chunk]``, in order,
wherever the executor runs them; ``submit_chunks(func, args_per_chunk)`` starts
the same without waiting (:class:`PendingChunks`: its ``result()`` waits), for
work this process needs later (the offline randomizers of
:class:`vflsec.he.paillier.RandomnessStream`). Two implementations:

* :class:`LocalPoolExecutor` (the default): this machine's process pool of
  :mod:`vflsec.he._pool`, as before executors existed; ``set_num_processes``
  still sets its size.
* :class:`vflsec.he.RayExecutor`: Ray tasks over the row chunks, on a Ray
  cluster of the party's own machines (:mod:`vflsec.he.ray_executor`).

:func:`set_executor` chooses the executor of this process (``vflsec party``
does it from ``[compute]`` of the party file, :func:`executor_from_config`);
:func:`use_executor` does it for a block (the estimators' ``executor=``).

Secrets never leave the process that owns them. What a chunk function gets
is the public modulus, the public DJN base ``hs`` and plain integers
(plaintexts of the party's own values, ciphertexts, encoded features).
Decryption takes the private key's factors, so it never goes to the chosen
executor: the key holder decrypts in its own process or in its own local
pool's worker processes (children of the key holder on its machine, as
before executors existed) -- :func:`executor_for` with ``holds_secret=True``.
A chunk function that takes key material is marked :func:`local_only`, and an
executor that ships work off this process's machine refuses it.
"""
from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar

from .._arrays import check_positive_int
from . import _pool

__all__ = [
    "ENGINES",
    "Executor",
    "LocalPoolExecutor",
    "PendingChunks",
    "even_bounds",
    "executor_for",
    "executor_from_config",
    "get_executor",
    "local_only",
    "run_chunks",
    "set_executor",
    "split_work",
    "use_executor",
]

ENGINES = ("local", "ray")
"""The values of ``[compute] engine`` in a party file."""

_LOCAL_ONLY = "__vflsec_local_only__"

F = TypeVar("F", bound=Callable[..., Any])


def local_only(func: F) -> F:
    """Mark a chunk function whose arguments include key material (e.g. the
    factors of a Paillier modulus): only this process and its local pool may run it."""
    setattr(func, _LOCAL_ONLY, True)
    return func


def is_local_only(func: Callable[..., Any]) -> bool:
    return bool(getattr(func, _LOCAL_ONLY, False))


class PendingChunks(ABC):
    """The chunks of one operation handed to an executor without waiting for them
    (:meth:`Executor.submit_chunks`)."""

    @abstractmethod
    def result(self) -> List[Any]:
        """``[func(*args) for args in args_per_chunk]`` in order, waiting for what is not done
        (the executor's own errors as ``map_chunks`` raises them)."""

    def cancel(self) -> None:  # noqa: B027 - optional: work that is done has nothing to cancel
        """Give the results up (best effort: a chunk already running may still finish)."""


class _Done(PendingChunks):
    def __init__(self, values: List[Any]):
        self._values = values

    def result(self) -> List[Any]:
        return self._values


class _PoolPending(PendingChunks):
    def __init__(self, futures: List[Any]):
        self._futures = futures

    def result(self) -> List[Any]:
        return _pool.collect(self._futures)

    def cancel(self) -> None:
        for future in self._futures:
            future.cancel()


class Executor(ABC):
    """Runs the chunks of a party's vector work.

    ``map_chunks(func, args_per_chunk)`` returns ``[func(*args) for args in
    args_per_chunk]`` in order; ``func`` is a module-level function (workers
    import it by name) and the arguments are plain data. ``n_workers`` is how
    many chunks can run at once. ``close()`` releases what the executor
    started; a closed executor may start again on its next use.

    How an operation splits: :meth:`chunk_bounds` (the local pool's rule by
    default: about two chunks per worker). ``ships_arguments``: True when each
    task's arguments travel to another machine; then a single chunk still goes
    to the executor (the operation is big enough for a task, see
    :meth:`task_items`), and a vector-matrix product gives each task the rows
    and columns of its own block (:func:`vflsec.he.paillier` ``dot``).
    """

    ships_arguments = False

    @property
    @abstractmethod
    def n_workers(self) -> int:
        """How many chunks run at the same time."""

    @abstractmethod
    def map_chunks(self, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> List[Any]:
        """``[func(*args) for args in args_per_chunk]``, computed by the executor's workers."""

    def submit_chunks(self, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> PendingChunks:
        """Start ``map_chunks(func, args_per_chunk)`` and return without waiting for it where the
        executor's workers are not this process (they compute while it goes on); by default the
        chunks run now. Chunks submitted later may run before these (the executor's order)."""
        return _Done(self.map_chunks(func, args_per_chunk))

    def chunk_bounds(self, n_items: int, workers: int, min_chunk: int) -> List[Tuple[int, int]]:
        """The contiguous ``(start, stop)`` chunks of an operation over ``n_items`` for
        ``workers`` workers, none smaller than ``min_chunk`` (the operation's smallest
        chunk worth a round trip to a local pool process): about two per worker."""
        return _pool.chunk_bounds(n_items, workers, min_chunk)

    def task_items(self, min_chunk: int) -> int:
        """The fewest items an operation needs before its work leaves this process
        (fewer: it runs here, in one chunk); 0 leaves the choice to :meth:`chunk_bounds`."""
        return 0

    def close(self) -> None:  # noqa: B027 - optional: an executor that starts nothing has nothing to release
        """Release the executor's workers (nothing by default)."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LocalPoolExecutor(Executor):
    """This machine's process pool (:mod:`vflsec.he._pool`): the default executor.

    ``processes``: the pool's size; None (the default) follows
    :func:`vflsec.he.set_num_processes` (the available cores unless set), 1 runs
    every chunk in this process. Every LocalPoolExecutor shares the one pool of
    the interpreter (started on first use, resized when the size changes).
    """

    def __init__(self, processes: Optional[int] = None):
        self.processes = None if processes is None else check_positive_int(processes, "processes")

    @property
    def n_workers(self) -> int:
        return self.processes if self.processes is not None else _pool.get_num_processes()

    def map_chunks(self, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> List[Any]:
        return _pool.run_chunks(func, args_per_chunk, self.n_workers)

    def submit_chunks(self, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> PendingChunks:
        """The chunks queued in the pool (a single one too: it runs beside this process), or run
        now where the pool has one process or cannot start."""
        if _pool.runs_in_process(self.n_workers, max(2, len(args_per_chunk))):
            return _Done([func(*args) for args in args_per_chunk])
        return _PoolPending(_pool.submit_chunks(func, args_per_chunk, self.n_workers))

    def close(self) -> None:
        """Stop the shared pool's worker processes (the next use starts new ones)."""
        _pool.shutdown_pool()

    def __repr__(self) -> str:
        return f"LocalPoolExecutor(processes={self.processes!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalPoolExecutor) and other.processes == self.processes

    def __hash__(self) -> int:
        return hash((LocalPoolExecutor, self.processes))


_DEFAULT = LocalPoolExecutor()
_lock = threading.Lock()
_executor: Executor = _DEFAULT


def _check_executor(executor: Any, name: str = "executor") -> Executor:
    if not isinstance(executor, Executor):
        raise TypeError(f"{name} must be a vflsec.he.Executor (LocalPoolExecutor, RayExecutor) or None, got "
                        f"{type(executor).__name__}")
    return executor


def set_executor(executor: Optional[Executor]) -> Executor:
    """Run this process's HE vector work on ``executor`` (None: the default local
    pool). Returns the executor it replaces (which stays open: close it when done)."""
    global _executor
    chosen = _DEFAULT if executor is None else _check_executor(executor)
    with _lock:
        previous, _executor = _executor, chosen
    return previous


def get_executor() -> Executor:
    """The executor this process's HE vector work runs on."""
    return _executor


@contextlib.contextmanager
def use_executor(executor: Optional[Executor]) -> Iterator[Executor]:
    """Within the block, HE vector work runs on ``executor`` (None: leave the
    current one); the previous executor comes back after it. The choice is the
    process's, not the thread's (the in-memory runner executes each party in a
    thread): two blocks in concurrent threads would see each other's choice."""
    if executor is None:
        yield get_executor()
        return
    previous = set_executor(executor)
    try:
        yield executor
    finally:
        set_executor(previous)


def executor_for(processes: Optional[int], *, holds_secret: bool = False) -> Tuple[Executor, int]:
    """``(executor, workers)`` for one vector operation: the process's executor
    and its width for ``processes=None``; this process alone for 1; for k > 1 the
    process's executor split into chunks for k workers (a local pool of k
    processes when the executor is the local pool, as before executors existed).
    ``holds_secret``: the chunks carry key material, so an executor that is not
    a local pool is replaced by the local pool (the key never leaves this machine's
    processes of this party)."""
    executor = get_executor()
    if holds_secret and not isinstance(executor, LocalPoolExecutor):
        executor = _DEFAULT
    if processes is None:
        return executor, executor.n_workers
    processes = check_positive_int(processes, "processes")
    if processes == 1 or isinstance(executor, LocalPoolExecutor):
        return LocalPoolExecutor(processes), processes
    return executor, processes


_IN_PROCESS = LocalPoolExecutor(1)


def even_bounds(n_items: int, parts: int) -> List[Tuple[int, int]]:
    """``range(n_items)`` as ``parts`` contiguous chunks whose sizes differ by at most one
    (fewer when there are fewer items)."""
    parts = max(1, min(parts, n_items))
    size, extra = divmod(n_items, parts)
    bounds, start = [], 0
    for i in range(parts if n_items > 0 else 0):
        stop = start + size + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def split_work(processes: Optional[int], n_items: int, min_chunk: int) -> Tuple[Executor, List[Tuple[int, int]]]:
    """``(executor, chunks)`` for one vector operation of public work over ``n_items``
    items: :func:`executor_for` and its :meth:`Executor.chunk_bounds`, or this process
    and one chunk when the operation is below the executor's :meth:`Executor.task_items`."""
    executor, workers = executor_for(processes)
    if n_items < executor.task_items(min_chunk):
        return _IN_PROCESS, [(0, n_items)] if n_items > 0 else []
    return executor, executor.chunk_bounds(n_items, workers, min_chunk)


def run_chunks(executor: Executor, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> List[Any]:
    """``[func(*args) for args in args_per_chunk]`` on ``executor``; a single chunk
    runs in this process (a pool round trip would cost more than it saves) unless
    the executor ships its tasks elsewhere (the operation chose one task there:
    :func:`split_work`)."""
    if not args_per_chunk or (len(args_per_chunk) == 1 and not executor.ships_arguments):
        return [func(*args) for args in args_per_chunk]
    return executor.map_chunks(func, args_per_chunk)


def executor_from_config(compute: Mapping[str, Any]) -> Executor:
    """The executor a party file's ``[compute]`` table names (checked by
    :func:`vflsec.runtime.config.load_party_config`): ``engine = "local"`` (the
    default) or ``"ray"`` with ``address`` (a Ray cluster's ``HOST:PORT``, or
    ``"auto"``; without it a Ray instance of this party's own on this machine).
    ValueError ``<what> -- <fix>`` when Ray is missing; a cluster that does not
    answer is a ConnectionError (:class:`vflsec.he.RayExecutor`)."""
    engine = compute.get("engine", "local")
    if engine not in ENGINES:
        raise ValueError(f"[compute] engine must be one of {', '.join(map(repr, ENGINES))}, got {engine!r} -- set "
                         "engine = \"local\" (this machine's process pool) or \"ray\" (a Ray cluster, with "
                         "address = its HOST:PORT)")
    if engine == "local":
        return LocalPoolExecutor()
    from .ray_executor import RayExecutor

    try:
        return RayExecutor(address=compute.get("address"))
    except ImportError:
        raise ValueError("[compute] engine = \"ray\" but Ray is not installed -- pip install \"vflsec[ray]\", or "
                         "set engine = \"local\"") from None
