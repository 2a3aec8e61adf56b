"""Speed and memory benchmarks: everything `make bench` runs, each writing one results file."""
