"""Parsl, end to end: a local HighThroughputExecutor with 2 workers, Parsl's default data
serializer (dill) against :func:`freight.integrations.parsl.install`. Values are app arguments and
come back as results (``echo``); closures are arguments too (dill or freight, by value), called on
the worker. The workers reply in kind: freight payloads in, freight results out."""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

from freight.bench.engines import tasks


def measure(serializer: str, quick: bool) -> list[dict[str, Any]]:
    import parsl
    from parsl import python_app
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    if serializer == "freight":
        import freight.integrations.parsl as fp

        fp.install()
    # HTEX starts interchange.py and process_worker_pool.py from PATH: this interpreter's scripts
    os.environ["PATH"] = os.pathsep.join(p for p in (os.path.dirname(sys.executable), os.environ.get("PATH")) if p)
    # the task functions are importable (freight.bench.engines.tasks): dill sends them by reference
    apps = {name: python_app(getattr(tasks, name)) for name in ("inc", "echo", "call")}

    def batch(workload: str, values: list[Any]) -> list[Any]:
        if workload == "tiny tasks":
            futures = [apps["inc"](v) for v in values]
        elif workload == "closures carrying arrays":
            futures = [apps["call"](fn, i) for i, fn in enumerate(values)]
        else:
            futures = [apps["echo"](v) for v in values]
        return [f.result() for f in futures]

    with tempfile.TemporaryDirectory() as run_dir:
        htex = HighThroughputExecutor(label="htex", address="127.0.0.1", max_workers_per_node=2, cores_per_worker=1,
                                      provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1))  # fmt: skip
        dfk = parsl.load(Config(executors=[htex], run_dir=run_dir, strategy="none", usage_tracking=0))
        try:
            return tasks.measure_workloads("parsl", serializer, quick, batch)
        finally:
            dfk.cleanup()
            parsl.clear()
