"""Tests of the semantic-cache suite."""
