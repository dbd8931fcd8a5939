"""``python -m mklkit``: the command line, as the ``mklkit`` command (:func:`mklkit.cli.main`)."""

import sys

from mklkit.cli import main

sys.exit(main())
