import sys

from pimem_core.doors.launcher import main

sys.exit(main())
