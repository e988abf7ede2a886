"""Tests of one module or layer of harness/."""
