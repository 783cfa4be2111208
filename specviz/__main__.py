"""`python -m specviz …`: the command line in specviz/cli.py."""
import sys

from specviz.cli import main

sys.exit(main())
