import sys

from pimem_core.cli import main

sys.exit(main())
