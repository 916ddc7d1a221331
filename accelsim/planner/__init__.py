"""``accelsim plan``: the parallel plans of a model on a number of chips, the ones whose
memory fits, simulated through a sweep store, and the fastest with its breakdown."""
