"""Python test harness of nki-rs: checks emitted NKI Python against the official
API signatures (`check`) and executes emitted kernels op by op on a NumPy fake
of `nki` (`run`). See `python -m nki_harness --help`."""
