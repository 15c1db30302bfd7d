"""``python -m elasticmq_py.toxiproxy --port 8474``"""

import sys

from elasticmq_py.toxiproxy.cli import main

sys.exit(main())
