import atexit
import os
import shutil
import tempfile

pytest_plugins = ["tests.kafka_fixtures", "tests.spark_fixtures"]

# Every writer appends to the audit log; tests (and the processes they start) must not write
# the user's own audit log (~/.local/state/quota-console). One throwaway file for the whole
# session, removed after.
_AUDIT_DIR = tempfile.mkdtemp(prefix="quota-audit-")
atexit.register(shutil.rmtree, _AUDIT_DIR, ignore_errors=True)
os.environ["QUOTA_AUDIT_LOG"] = os.path.join(_AUDIT_DIR, "audit.jsonl")

