"""The directory the test step puts last on the suites' PYTHONPATH when rerun_failed_tests is the only retry
(run/retries): it holds one top-level module, the pytest plugin eb_pytorch_cuda_no_retries, and nothing else
a suite could import by mistake."""
