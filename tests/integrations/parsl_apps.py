"""Apps of tests/integrations/test_parsl.py, imported by reference in the HTEX workers (the test
puts this folder on their PYTHONPATH)."""

from __future__ import annotations

import os

from parsl import python_app


@python_app
def echo(value):
    return value


@python_app
def where(value):
    """The worker's pid, whether it has freight installed for Parsl, and the value's type."""
    import os

    import freight.integrations.parsl as fp

    return os.getpid(), fp.installed(), f"{type(value).__module__}.{type(value).__qualname__}"


@python_app
def call(fn, x):
    return fn(x)


@python_app
def make_scaler(factor):
    import numpy as np

    weights = np.full(4, factor)

    def scale(x):
        return weights * x

    return scale


def pid():
    return os.getpid()
