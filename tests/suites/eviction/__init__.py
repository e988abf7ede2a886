"""Tests of the eviction suite."""
