"""Benchmark and reproduction harness for LLM-serving cache experiments."""

__version__ = "0.1.0"
