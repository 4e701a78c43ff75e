"""The Celery app of the ``celery`` engine benchmark, imported by the client and by the worker
(``celery -A freight.bench.engines._celery_app worker``). The environment picks the broker and the
serializer, so that one module serves both modes."""

from __future__ import annotations

import os

from celery import Celery

from freight.bench.engines import tasks

BROKER = os.environ.get("FREIGHT_BENCH_CELERY_BROKER", "redis://127.0.0.1:6379/0")

app = Celery("freight_bench", broker=BROKER, backend=BROKER)
app.conf.update(
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=1,
    result_expires=600,
    # pickle, not Celery's JSON default: JSON cannot carry arrays or DataFrames at all, and pickle
    # is what freight's allow_pickle=True is to be compared with
    task_serializer="pickle",
    result_serializer="pickle",
    accept_content=["pickle"],
    result_accept_content=["pickle"],
)

if os.environ.get("FREIGHT_BENCH_CELERY_SERIALIZER") == "freight":
    import freight.integrations.celery as fc

    fc.install(app, allow_pickle=True)

inc = app.task(name="bench.inc")(tasks.inc)
echo = app.task(name="bench.echo")(tasks.echo)
