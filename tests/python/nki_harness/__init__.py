"""Python test harness of nki-rs: checks emitted NKI Python against the official
API signatures (`check`) and executes the kernels of any NKI package op by op
on a NumPy implementation of `nki` (`run`). See `python -m nki_harness --help`."""
