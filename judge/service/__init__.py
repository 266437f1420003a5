"""The HTTP service: API, store, workers, progress, the benchmark."""
