"""The tests. Their tree mirrors the package: unit/ (one module or layer of harness/),
suites/<suite>/ (one suite each), system/ (the whole tool from outside); what they share
(conftest, fixtures/, stored runs, fakes) sits here, beside mutations/ and benchmarks/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent  # tests/, wherever a test file sits below it
REPO = TESTS.parent
