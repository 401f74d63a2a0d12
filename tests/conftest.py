import os
import tempfile

pytest_plugins = ["tests.kafka_fixtures", "tests.spark_fixtures"]

# Every writer appends to the audit log; tests (and the processes they start) must not write
# the checkout's own .cache/audit log. One throwaway file for the whole session.
os.environ["QUOTA_AUDIT_LOG"] = os.path.join(tempfile.mkdtemp(prefix="quota-audit-"),
                                             "audit.jsonl")
