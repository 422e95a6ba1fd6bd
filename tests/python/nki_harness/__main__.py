"""`python -m nki_harness`: see `cli`."""

import sys

from .cli import main

sys.exit(main())
