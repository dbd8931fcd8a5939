"""Three ways to hand a component's scalar code to a generic compiled function, for
``benchmarks/component_forms/cache_check.py``: which of them numba's on-disk cache reuses in a new process."""
