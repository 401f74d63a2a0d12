"""``python -m quota_core``: the kafka-client-quotas CLI."""
import sys

from .cli import _lean_kafka_import, main

_lean_kafka_import()
sys.exit(main())
