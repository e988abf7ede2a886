"""Running suites: selection and plans, the target's lifecycle, the runner and the worker
process. Imports every layer below; only harness.cli imports it.
"""
