"""PyTorch test-suite results: one model, parsers for run_test.py output and XML reports, a failure policy, reports.

Judging a ten-hour test run must be exact and explainable: every suite, every failed test, every
crash is kept in the model, and the policy names why each failure is tolerated or not.
"""
