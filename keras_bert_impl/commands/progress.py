"""Progress of the inference commands on a terminal."""

import sys


class Progress:
    """`kbert CMD: N/M texts` on stderr, rewritten in place, when stderr is a terminal and the
    input is longer than a few batches (a pipe or a log file gets nothing)."""

    def __init__(self, command, total, batch_size, unit="texts"):
        self.command, self.total, self.unit, self.count = command, total, unit, 0
        self.active = sys.stderr.isatty() and total > 4 * batch_size

    def update(self, count):
        self.count += count
        if self.active:
            print(
                f"\rkbert {self.command}: {self.count:,}/{self.total:,} {self.unit}",
                end="",
                file=sys.stderr,
                flush=True,
            )

    def done(self):
        if self.active:
            print(file=sys.stderr)
