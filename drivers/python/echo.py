"""The bare echo of `bench driver perf`: every line read on stdin written
back on stdout, with the same reading (the buffered stdin's lines) and
writing (one os.write per line) as lockbench_driver.py. Beside a driver's
protocol round trip it is the physical limit of the hop between the two
runtimes: a pipe each way and one wake-up on each side."""

import os
import sys


def main():
    fd = sys.stdout.fileno()
    for line in sys.stdin.buffer:
        while line:
            line = line[os.write(fd, line):]


if __name__ == "__main__":
    main()
