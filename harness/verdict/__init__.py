"""From a stored run to verdicts: analysis, the ledger's verdicts, comparison with a baseline,
a metric's history with its steps, and their wording. Imports harness.model and below.
"""
