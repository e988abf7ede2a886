"""Tests of the engine-hotload suite."""
