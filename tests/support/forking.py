"""Programs that fork after freight has worked in the parent, run in a fresh interpreter.

A hang after ``fork()`` is what these tests look for, so each program runs in its own session
under a generous limit: when it does not finish, the whole process group (the program and every
child it forked) is killed and the test fails saying which step never answered. The limit is a
hang check, far above any run's time, not a timing threshold.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from support import child_env

# A forked child that has not answered in this long is hung (every step takes well under a
# second here; the figure leaves room for a machine 100x slower).
HANG_S = int(os.environ.get("FREIGHT_TEST_HANG_S", "300"))


def run_forked(*parts: str, env: dict[str, str] | None = None) -> list[str]:
    """Runs the program made of ``parts`` (each dedented) in a fresh interpreter and returns the
    lines it printed. The program prints a line per step it finished; the test checks them."""
    program = "".join(textwrap.dedent(part) for part in parts)
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", program],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env or child_env(),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        steps = out.decode(errors="replace").strip().splitlines()
        pytest.fail(
            f"a process hung after fork: no answer in {HANG_S} s; steps finished: {steps}; "
            f"stderr: {err.decode(errors='replace')[-2000:]}"
        )
    text, err_text = out.decode(errors="replace"), err.decode(errors="replace")
    assert proc.returncode == 0, f"exit status {proc.returncode}\nstdout: {text}\nstderr: {err_text[-4000:]}"
    return text.strip().splitlines()
