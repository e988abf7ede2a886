"""Publishing a stored run: the HTML report and each suite's view, JUnit, the history page,
docs/measurements.md, and `publish()` that writes them all. Imports harness.experiments and
below.
"""
