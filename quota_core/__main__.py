"""``python -m quota_core``: the kafka-client-quotas CLI."""
import sys

from quota_core.cli.main import main

sys.exit(main())
