"""Shared pytest configuration: Hypothesis profiles.

Choose a profile with the ``HYPOTHESIS_PROFILE`` environment variable:

* ``ci`` (the default): about 200 examples per property, no deadline (timings on shared CI
  machines are noisy), and the ``too_slow`` health check off (our strategies build nested
  containers and numpy arrays, which Hypothesis sometimes finds slow to generate);
* ``dev``: 50 examples, for a quick local loop.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)

settings.register_profile("ci", max_examples=200, **_COMMON)
settings.register_profile("dev", max_examples=50, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
