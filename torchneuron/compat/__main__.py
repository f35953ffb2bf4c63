"""`python -m torchneuron.compat ops|models` == `torchneuron compat ops|models`."""

import sys

from torchneuron.cli import main

sys.exit(main(["compat", *sys.argv[1:]]))
