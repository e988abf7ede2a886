"""Tests of the redis-cluster suite."""
