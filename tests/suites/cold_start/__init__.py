"""Tests of the cold-start suite."""
