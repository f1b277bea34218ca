import sys

from pimem_core.launcher import main

sys.exit(main())
