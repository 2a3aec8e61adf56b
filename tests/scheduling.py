"""How the two pytest-xdist workers of `make test` and `make test-slow` share the modules.

`--dist loadgroup` keeps each module on one worker (tests/conftest.py marks each test with its
module's group), so a module-scoped fixture is built once per run. Which worker gets which module
is decided here, from tests/durations.json (each test's seconds in a measured run of both tiers,
written by `python -m tests.scheduling LOG...` from pytest's `--durations` lines):

- a worker about to run out of work gets the longest module left, so the long ones start first
  and the short ones fill in at the end, when the two workers finish within a short module of
  each other (longest-processing-time first);
- a worker that asks while it still holds a long test gets the shortest module left instead.
  pytest-xdist asks for more work whenever a worker has two tests or fewer left, and a worker
  only starts a test once the next one is queued behind it: a module of one long test always
  pulls another module in behind it, which that worker reaches only after the long test. Handed
  the next longest module there, one worker would end with two long modules in a row while the
  other ran out of work.

A test not in the file (new, or under the file's `--durations-min`) counts as DEFAULT_SECONDS,
or SLOW_DEFAULT_SECONDS in a run of the slow tier (`-m slow`), whose tests take about 20 s or more.
"""

import json
import os
import re
import sys
import time

from xdist.scheduler import LoadGroupScheduling

DURATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "durations.json")
DEFAULT_SECONDS = 1.0  # about the mean of make test's tests under 3 s, on the 2-core machine
SLOW_DEFAULT_SECONDS = 30.0


def read_durations(path=DURATIONS):
    """{test id: seconds}; {} when the file is missing (every test then counts the same)."""
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def plain_id(nodeid):
    """A node id without its `@group` suffix (what pytest's --durations lines print with it)."""
    return nodeid.rsplit("@", 1)[0] if "@" in nodeid.rsplit("]", 1)[-1] else nodeid


class LongestFirstScheduling(LoadGroupScheduling):
    """LoadGroupScheduling that hands out the module the worker should run next (above) instead
    of the next one in collection order. `clock` gives the time in seconds (a simulation's own)."""

    def __init__(self, config, log=None, durations=None, clock=time.monotonic):
        super().__init__(config, log)
        self.durations = read_durations() if durations is None else durations
        self.clock = clock
        self.running_since = {}
        markexpr = getattr(getattr(config, "option", None), "markexpr", "")
        self.default = SLOW_DEFAULT_SECONDS if markexpr.strip() == "slow" else DEFAULT_SECONDS

    def estimate(self, nodeid):
        return self.durations.get(plain_id(nodeid), self.default)

    def seconds(self, nodeids):
        return sum(self.estimate(nodeid) for nodeid in nodeids)

    def held_seconds(self, node):
        """The work the node still holds, less what its running test has done of it (its
        estimate at most)."""
        held = [
            self.estimate(nodeid)
            for unit in self.assigned_work.get(node, {}).values()
            for nodeid, done in unit.items()
            if not done
        ]
        if not held:
            return 0.0
        elapsed = self.clock() - self.running_since.get(node, self.clock())
        return sum(held) - min(elapsed, held[0])

    def mark_test_complete(self, node, item_index, duration=0):
        self.running_since[node] = self.clock()
        super().mark_test_complete(node, item_index, duration)

    def _assign_work_unit(self, node):
        self.running_since.setdefault(node, self.clock())
        held = self.held_seconds(node)
        first_free = all(held <= self.held_seconds(other) for other in self.nodes if other is not node)
        pick = max if first_free else min
        scope = pick(self.workqueue, key=lambda scope: self.seconds(self.workqueue[scope]))
        self.workqueue.move_to_end(scope, last=False)  # the parent hands out the queue's first unit
        super()._assign_work_unit(node)


class _Config:
    """What the schedulers read of pytest's config, for `simulate`."""

    def __init__(self, workers, markexpr=""):
        self.option = type("Option", (), {"loadscopereorder": False, "markexpr": markexpr})()
        self.workers = workers

    def getvalue(self, name):
        assert name == "tx", name
        return [f"{self.workers}*popen"]


class _Quiet:
    """A silent pytest-xdist log."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args):
        pass


class _Worker:
    """A pytest-xdist worker as the scheduler sees it: it runs the tests it was sent in order, each
    only once another is queued behind it or it was told to shut down."""

    def __init__(self, name):
        self.gateway = type("Gateway", (), {"id": name})()
        self.queue, self.shutting_down, self.clock = [], False, 0.0

    def send_runtest_some(self, indices):
        self.queue.extend(indices)

    def shutdown(self):
        self.shutting_down = True


def simulate(nodeids, seconds, scheduling=None, workers=2, markexpr=""):
    """Each worker's finishing time (s) when `scheduling` (a scheduler class) hands `nodeids` (in
    collection order, with their `@group` suffixes) to `workers` workers and each test takes
    `seconds[its id]` (the default of a run with `-m markexpr` if absent)."""
    default = SLOW_DEFAULT_SECONDS if markexpr == "slow" else DEFAULT_SECONDS
    nodes = [_Worker(f"gw{index}") for index in range(workers)]
    now = [0.0]
    if scheduling is None:
        scheduler = LongestFirstScheduling(
            _Config(workers, markexpr), _Quiet(), seconds, clock=lambda: now[0]
        )
    else:
        scheduler = scheduling(_Config(workers, markexpr), _Quiet())
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, list(nodeids))
    scheduler.schedule()
    while True:
        ready = [node for node in nodes if len(node.queue) >= 2 or (node.queue and node.shutting_down)]
        if not ready:
            break
        node = min(
            ready, key=lambda node: node.clock + seconds.get(plain_id(nodeids[node.queue[0]]), default)
        )
        index = node.queue.pop(0)
        node.clock += seconds.get(plain_id(nodeids[index]), default)
        now[0] = node.clock
        scheduler.mark_test_complete(node, index)
    assert scheduler.tests_finished, "the simulated run stopped with tests left"
    return [node.clock for node in nodes]


DURATION_LINE = re.compile(r"^\s*([0-9.]+)s (?:setup|call|teardown)\s+(\S+)")


def durations_of_logs(paths):
    """{test id: setup + call + teardown seconds} over pytest logs with --durations lines."""
    seconds = {}
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                match = DURATION_LINE.match(line)
                if match:
                    name = plain_id(match.group(2))
                    seconds[name] = seconds.get(name, 0.0) + float(match.group(1))
    return {name: round(value, 1) for name, value in sorted(seconds.items())}


def main(argv):
    if not argv:
        print(
            "usage: python -m tests.scheduling LOG... (pytest output with --durations lines)", file=sys.stderr
        )
        return 2
    durations = durations_of_logs(argv)
    if not durations:
        print(f"no --durations lines in {', '.join(argv)}", file=sys.stderr)
        return 2
    temporary = DURATIONS + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(durations, f, indent=0, sort_keys=True)
        f.write("\n")
    os.replace(temporary, DURATIONS)
    print(f"{DURATIONS}: {len(durations)} tests, {sum(durations.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
