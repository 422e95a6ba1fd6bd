"""Python test harness of nki-rs: checks emitted NKI Python against the official
API signatures (`check`) and executes the kernels of any NKI package op by op
on a NumPy implementation of `nki` (`run`). See `python -m nki_harness --help`."""

import os

# The executor's matrix products are single tiles (at most 128 x 512): BLAS
# threads cost more than they save there, and with several kernels running at
# once their busy-waiting takes the other processes' cores.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
