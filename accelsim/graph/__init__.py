"""The op-graph IR of a training step: ops, tensors, building, queries and passes."""
