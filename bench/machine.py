"""What every bench records about the machine, and waiting for it to go quiet.

Standard library only, so the PyTorch reference venv can import it too.
"""

import os
import time


def read_loadavg():
    """The 1, 5 and 15-minute load averages, or None where /proc is missing."""
    try:
        with open("/proc/loadavg", encoding="utf-8") as f:
            return [float(v) for v in f.read().split()[:3]]
    except OSError:
        return None


def wait_for_idle(limit_seconds):
    """Sleeps until the 1-minute load average is below half the cores, at most `limit_seconds`;
    returns the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit_seconds:
        load = read_loadavg()
        if load is None or load[0] < 0.5 * (os.cpu_count() or 1):
            break
        time.sleep(10)
    return time.perf_counter() - start


def cpu_model():
    """The CPU's model name from /proc/cpuinfo, or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        return None
