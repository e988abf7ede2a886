"""Tests of the prompt-cas suite."""
