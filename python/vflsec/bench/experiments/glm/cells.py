"""The cells of one ``vflsec bench glm`` run: the accuracy rows (:mod:`.accuracy`),
then the runtime grid (:mod:`.runtime`), each added to the results as it finishes
so an interrupted run still writes them (the runner marks them partial). Without SPU
(the ``mpc`` extra) the MPC runtime methods are not run: ``result["runtime_not_run"]``
names them with the reason, which the report shows in their place."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from .grid import MPC_METHODS, GLMBenchConfig

__all__ = ["run_cells"]


def run_cells(grid: GLMBenchConfig, result: Dict[str, Any], *, data_dir: Optional[Path] = None) -> None:
    """Measure every cell of ``grid`` into ``result["accuracy"]`` and ``result["runtime"]``."""
    from .accuracy import run_accuracy
    from .mpc_cells import NOT_INSTALLED, spu_installed
    from .runtime import run_runtime

    result["accuracy"] = {"rows": []}
    result["runtime"] = []
    mpc = [m for m in grid.runtime_methods if m in MPC_METHODS]
    result["runtime_not_run"] = {} if not mpc or spu_installed() else {m: NOT_INSTALLED for m in mpc}
    run_accuracy(grid, data_dir=data_dir, state=result)
    run_runtime(result["runtime"], sizes=grid.runtime_sizes, epoch_counts=grid.runtime_epochs,
                epochs_n=grid.runtime_epochs_n, features=list(grid.runtime_features),
                methods=[m for m in grid.runtime_methods if m not in result["runtime_not_run"]],
                batch_size=grid.runtime_batch_size, he_batches=grid.runtime_he_batches,
                paillier_3072=grid.runtime_paillier_3072, lr=grid.learning_rate,
                mpc_batches=grid.runtime_mpc_batches or {})
