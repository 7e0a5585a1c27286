import sys

from tracegen.serve import main

sys.exit(main())
