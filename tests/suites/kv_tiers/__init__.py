"""Tests of the kv-tiers suite."""
