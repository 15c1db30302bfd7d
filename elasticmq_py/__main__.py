import sys

from elasticmq_py.cli import main

sys.exit(main())
