"""Tests of one suite each: tests/suites/<suite>/ mirrors harness/experiments/<suite>/."""
