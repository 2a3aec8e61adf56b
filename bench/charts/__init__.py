"""What docs/benchmarks.md shows, drawn and tabulated from the results files alone."""
