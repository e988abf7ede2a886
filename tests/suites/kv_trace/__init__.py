"""Tests of the kv-trace suite."""
