"""tests/scheduling.py: which module each of make test's two workers gets, checked on a simulated
run of made-up modules (the scheduler is pytest-xdist's own, driven by simulated workers)."""

from xdist.scheduler import LoadGroupScheduling

from tests.scheduling import durations_of_logs, plain_id, simulate


def _suite(modules):
    """(node ids with their @group suffixes in collection order, {test id: seconds})."""
    nodeids, seconds = [], {}
    for module, times in modules:
        for index, duration in enumerate(times):
            name = f"tests/{module}.py::test_{index}"
            nodeids.append(f"{name}@tests/{module}.py")
            seconds[name] = duration
    return nodeids, seconds


# Collection order puts the long modules apart, as the alphabet did in make test: a lone 300 s
# test, a module of five 50 s tests, twenty short modules, then a lone 200 s test.
MODULES = [
    ("a", [1] * 5),
    ("lone", [300]),
    ("big", [50] * 5),
    ("b", [2] * 10),
    *[(f"short_{index}", [1, 1]) for index in range(20)],
    ("lone_2", [200]),
]


def test_the_longest_modules_start_first_and_the_workers_finish_close_together():
    nodeids, seconds = _suite(MODULES)
    total = sum(seconds.values())
    stock = simulate(nodeids, seconds, LoadGroupScheduling)
    ours = simulate(nodeids, seconds)
    assert sum(stock) == sum(ours) == total
    # In collection order one worker runs both lone tests in a row: 550 s of 815.
    assert max(stock) == 550
    # Longest first: the lone 300 s test on one worker, the 250 s module then the lone 200 s test
    # on the other (the best split there is: 450 s), the short modules around them.
    assert max(ours) == 452 and min(ours) == total - 452


def test_a_lone_long_test_pulls_in_the_shortest_module_behind_it():
    """pytest-xdist sends a worker more work while it has two tests or fewer left; a worker holding
    one 300 s test gets the 1 s module then, not the next long one, which the other worker runs."""
    nodeids, seconds = _suite([("lone", [300]), ("long", [100]), ("other", [100]), ("tiny", [1])])
    assert sorted(simulate(nodeids, seconds)) == [200, 301]
    assert max(simulate(nodeids, seconds, LoadGroupScheduling)) == 400  # lone, then long behind it


def test_durations_are_read_from_pytest_logs(tmp_path):
    log = tmp_path / "make-test.log"
    log.write_text(
        "============================= slowest durations ==============================\n"
        "61.20s call     tests/x/test_a.py::test_one[int8]@tests/x/test_a.py\n"
        "12.05s setup    tests/x/test_a.py::test_one[int8]@tests/x/test_a.py\n"
        "3.00s teardown tests/x/test_b.py::test_two\n"
        "(697 durations < 3s hidden.)\n",
        encoding="utf-8",
    )
    assert durations_of_logs([log]) == {
        "tests/x/test_a.py::test_one[int8]": 73.2,
        "tests/x/test_b.py::test_two": 3.0,
    }
    assert plain_id("tests/x/test_a.py::test_one[a@b]") == "tests/x/test_a.py::test_one[a@b]"
