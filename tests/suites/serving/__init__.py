"""Tests of the serving suite."""
