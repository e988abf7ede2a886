"""Tests of the failover suite."""
