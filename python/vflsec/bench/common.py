"""What the benchmarks share besides the runner: timing (median wall and CPU time), seeds and
the DP-noise label, strict JSON, markdown tables with epsilon and audit cells, the
PrivacyWarnings a DP row carries, and figures."""
from __future__ import annotations

import json
import math
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple


def derived_seed(base: Optional[int], *parts: Any) -> Optional[int]:
    """A cell's DP-noise seed from a benchmark's ``--seed`` (an experiment setting,
    not for deployment): None when ``base`` is None (OS-entropy noise), else a
    non-negative 31-bit int fixed by ``base`` and the cell's ``parts``."""
    if base is None:
        return None
    import hashlib

    digest = hashlib.sha256(repr((int(base),) + parts).encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def dp_noise_label(base: Optional[int]) -> str:
    """How a report describes the DP noise of a run with ``--seed base`` (None: not given)."""
    if base is None:
        return "DP noise: OS-entropy CSPRNG (numbers vary run to run; pass --seed to reproduce)"
    return f"DP noise: seeded generator (seed {base}; experiment setting, not for deployment)"


def median_time(fn: Callable[[], Any], *, repeats: int = 5, warmup: int = 1, min_total: float = 0.0) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` runs after ``warmup`` runs.

    With ``min_total`` > 0, keeps repeating (up to 5x ``repeats``) until the
    measured runs add up to at least that many seconds, so fast kernels are
    not timed from a single noisy sample.
    """
    for _ in range(warmup):
        fn()
    samples: List[float] = []
    while len(samples) < repeats or (sum(samples) < min_total and len(samples) < 5 * repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def median_cpu_time(fn: Callable[[], Any], *, repeats: int = 5, warmup: int = 1) -> Tuple[float, float]:
    """Median CPU time (``time.process_time``: every thread of the process) and
    median wall time of ``fn()`` in seconds, over ``repeats`` runs after
    ``warmup`` runs. For single-threaded comparisons, where CPU time is not
    disturbed by other load on the machine."""
    for _ in range(warmup):
        fn()
    cpu: List[float] = []
    wall: List[float] = []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return statistics.median(cpu), statistics.median(wall)


def write_json(path: Path, payload: Dict[str, Any]) -> None:
    """Strict JSON (RFC 8259): NaN and +-inf, which strict parsers reject,
    are written as null."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        json.dump(_finite(payload), fh, indent=2, sort_keys=False, default=_json_default, allow_nan=False)
        fh.write("\n")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {key: _finite(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(value) for value in obj]
    try:
        import numpy as np

        if isinstance(obj, np.floating):
            return _finite(float(obj))
        if isinstance(obj, np.ndarray):
            return _finite(obj.tolist())
    except ImportError:  # pragma: no cover
        pass
    return obj


def _json_default(obj: Any) -> Any:
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def markdown_table(headers: List[str], rows: List[List[Any]]) -> str:
    def fmt(v: Any) -> str:
        if v is None:
            return "n/a"
        if isinstance(v, float):
            if v == 0 or 1e-3 <= abs(v) < 1e5:
                return f"{v:.4g}"
            return f"{v:.3e}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


NO_GUARANTEE = "no guarantee"


def epsilon_cell(epsilon: Optional[float], *, claims_dp: bool, mechanisms: Sequence[str] = ()) -> Any:
    """A reported epsilon for a table: the number; for a DP defense that reports
    none (``PrivacySpent.epsilon`` None: its release reads data it protects)
    ``"no guarantee"``, never a blank; None (n/a) where no DP is claimed.
    With ``mechanisms`` (names of :data:`vflsec.dp.MECHANISMS`), a claimed
    epsilon also shows the last ``vflsec audit``'s verdict on them
    (``"4.99 (audit 0.62x)"``: empirical lower bound / claim; see :func:`audit_legend`)."""
    if epsilon is None and claims_dp:
        return NO_GUARANTEE
    if epsilon is None or not mechanisms:
        return epsilon
    return f"{epsilon:.4g} ({audit_cell(mechanisms)})"


@contextmanager
def privacy_warnings() -> Iterator[List[str]]:
    """The messages of every :class:`~vflsec.dp.PrivacyWarning` raised inside the
    block (each once, in order: e.g. a delta of at least 1/n), so the row it
    trains can carry them (``"privacy_warning"``) and its report label it
    (:func:`warned_cell`). Every warning is still shown: labelled, not silenced."""
    import warnings

    from ..dp.gaussian import PrivacyWarning

    messages: List[str] = []
    with warnings.catch_warnings():
        # Every cell's warning, not only the first from a line (which the registry would hide).
        warnings.simplefilter("always", PrivacyWarning)
        shown = warnings.showwarning

        def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                 line: Optional[str] = None) -> None:
            if issubclass(category, PrivacyWarning) and str(message) not in messages:
                messages.append(str(message))
            shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show  # restored by catch_warnings on leaving
        yield messages


def warning_text(messages: Sequence[str]) -> Optional[str]:
    """A row's ``"privacy_warning"``: the messages joined, None when there are none."""
    return "; ".join(messages) or None


WARNED = "PrivacyWarning, below"


def warned_cell(cell: Any, warning: Optional[str]) -> Any:
    """A table's epsilon ``cell`` of a row whose training raised a PrivacyWarning
    (its ``"privacy_warning"``), labelled; the messages go under the table (:func:`warning_notes`)."""
    if not warning:
        return cell
    shown = "n/a" if cell is None else (f"{cell:.4g}" if isinstance(cell, float) else str(cell))
    return f"{shown} ({WARNED})"


def warning_notes(rows: Iterable[Dict[str, Any]]) -> List[str]:
    """Markdown lines under a table whose rows :func:`warned_cell` labelled: the distinct messages."""
    distinct = list(dict.fromkeys(r["privacy_warning"] for r in rows if r.get("privacy_warning")))
    if not distinct:
        return []
    return [f"Rows marked '{WARNED}': their training raised a PrivacyWarning (the guarantee is weaker than the "
            "epsilon suggests): " + " | ".join(distinct), ""]


DP_LAYER = 1
"""Written into a run's results as ``"dp_layer"``: its DP rows come from the mechanism
layer of :mod:`vflsec.dp` (replace-one calibration, VFL-AFE's DP rescale factor), so
the audit of those mechanisms speaks for them. Runs without it predate that layer
(DP-SGD calibrated for add/remove, VFL-AFE +R with the paper's batch factor): their
reports print no audit verdict and say why (:func:`audit_mechanisms`)."""

PREDATES_DP_LAYER = ("this run predates vflsec.dp's mechanism layer (DP-SGD was calibrated for add/remove "
                     "neighbours, VFL-AFE +R used the paper's batch factor, which has no guarantee, and the classic "
                     "calibration was used beyond epsilon 1, where at epsilon 20 it does not give 20): its epsilons "
                     "are the ones reported then, not audited; run the benchmark again")


def audit_mechanisms(result: Dict[str, Any], mechanisms: Sequence[str]) -> Sequence[str]:
    """``mechanisms`` if ``result`` was produced by the mechanism layer, else none
    (so an old run's epsilons are not shown beside a newer audit's verdict)."""
    return mechanisms if result.get("dp_layer", 0) >= DP_LAYER else ()


def audit_cell(mechanisms: Sequence[str]) -> str:
    """``"audit 0.62x"`` (the last ``vflsec audit``'s largest lower bound / claim over
    ``mechanisms``) or ``"not audited"``."""
    from .audit_summary import audit_summary

    summary = audit_summary()
    return "not audited" if summary is None else summary.cell(mechanisms)


def audit_legend() -> str:
    """One line for a report that prints audit ratios beside its epsilons."""
    from .audit_summary import audit_summary

    summary = audit_summary()
    if summary is None:
        return ("No `vflsec audit` result was found (bench-out/audit or $VFLSEC_AUDIT): run `vflsec audit` to "
                "check each claimed epsilon against its mechanism's worst case.")
    return summary.describe() + "."


def pyplot():
    """matplotlib.pyplot with the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 110) -> None:
    """Write every benchmark figure the same way: the bounding box fitted to
    what is drawn (``bbox_inches="tight"``: tick labels, legends below a panel
    and titles are never cut at the edge), then close the figure."""
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)


def n_label(n: Any, what: str = "") -> str:
    """``"n=3"`` (``"n=3 runs/point"`` with ``what``): the number of runs behind a
    plotted value, for legends."""
    return f"n={n}" + (f" {what}" if what else "")
