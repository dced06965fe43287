"""Earlier implementations kept as measured baselines for the benchmarks."""
