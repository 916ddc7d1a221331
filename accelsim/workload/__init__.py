"""Workloads: layer tables (``workloads/*.yaml``), shape inference, lowering to an op DAG."""
