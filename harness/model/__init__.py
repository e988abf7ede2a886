"""The data model: suite specs and the claims ledger, the driver contract, the stored run
(records, manifest) and a case's child process. Imports harness.base and harness.infra.
"""
