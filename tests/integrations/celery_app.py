"""The Celery app of tests/integrations/test_celery.py, imported by the test (the client) and by
the worker processes it starts (``celery -A celery_app worker``). Configured from the environment
so that one module serves a worker with freight and one without."""

from __future__ import annotations

import os

from celery import Celery

BROKER = os.environ.get("FREIGHT_CELERY_BROKER", "redis://127.0.0.1:6379/0")

app = Celery("freight_celery_test", broker=BROKER, backend=BROKER)
app.conf.update(
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=1,
    result_expires=600,
    task_default_queue=os.environ.get("FREIGHT_CELERY_QUEUE", "celery"),
)

if os.environ.get("FREIGHT_CELERY_WITHOUT_FREIGHT") != "1":
    import freight.integrations.celery as fc

    _key = os.environ.get("FREIGHT_CELERY_KEY")
    fc.install(app, key=_key.encode() if _key else None)


@app.task
def echo(value):
    return value


@app.task
def describe(value):
    """What the worker received: its type and, for tables and arrays, their shape and a checksum."""
    import numpy as np

    out = {"type": f"{type(value).__module__}.{type(value).__qualname__}"}
    if isinstance(value, np.ndarray):
        out.update(shape=list(value.shape), dtype=str(value.dtype), total=float(value.sum()))
    elif hasattr(value, "shape"):
        out["shape"] = list(value.shape)
    return out


@app.task
def touch(path):
    """Leaves a file behind: the tests check a refused task never ran."""
    with open(path, "w") as fh:
        fh.write("ran")
    return path
