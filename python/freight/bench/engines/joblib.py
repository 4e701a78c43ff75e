"""joblib, end to end: ``Parallel(n_jobs=2)`` on the loky backend, joblib's default pickling
against :func:`freight.integrations.joblib.install`. Values are task arguments and come back as
results (``echo``); closures travel by value (loky pickles with cloudpickle) and are called there.

numpy *arguments* keep joblib's memmapping either way (its per-call reducers win over registered
ones), and numpy *results* keep its pipe: so the array row measures what a user gets, not freight's
shared memory alone. pandas (the DataFrame row) goes through shared memory with freight."""

from __future__ import annotations

import time
from typing import Any

from freight.bench.engines import tasks


def _batch(parallel: Any, workload: str, values: list[Any]) -> list[Any]:
    from joblib import delayed

    # Each batch starts from joblib's automatic batching as a user's own Parallel call does (its
    # end resets the statistics): the one Parallel kept open for the whole run would otherwise
    # carry the batch size learnt on the previous workload into this one, so that how fast the
    # previous workload went decided how the next was batched.
    parallel._backend.reset_batch_stats()
    if workload == "tiny tasks":
        return parallel(delayed(tasks.inc)(v) for v in values)
    if workload == "closures carrying arrays":
        return parallel(delayed(tasks.call)(fn, i) for i, fn in enumerate(values))
    return parallel(delayed(tasks.echo)(v) for v in values)


def measure(serializer: str, quick: bool) -> list[dict[str, Any]]:
    from joblib import Parallel, delayed
    from joblib.externals.loky import get_reusable_executor

    if serializer == "freight":
        import freight.integrations.joblib as fj

        fj.install()  # before the first Parallel: loky's workers get freight when they start
    # one Parallel for all batches: its loky executor (and its 2 workers) are reused between them
    with Parallel(n_jobs=2, backend="loky") as parallel:
        # both workers started and importing done before anything is timed (loky starts them
        # lazily; a task that waits a little cannot all land on one worker)
        parallel(delayed(time.sleep)(0.2) for _ in range(4))

        def workers() -> list[int]:
            # the Parallel's own executor: get_reusable_executor() without joblib's reducers would
            # replace it (other arguments), restarting the workers in the middle of the run
            return list(parallel._backend._workers._processes)

        rows = tasks.measure_workloads("joblib", serializer, quick, lambda w, v: _batch(parallel, w, v), workers)
    get_reusable_executor().shutdown(wait=True)
    return rows
