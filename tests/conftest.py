import atexit
import os
import shutil
import tempfile

import pytest

pytest_plugins = ["tests.kafka_fixtures", "tests.spark_fixtures"]

# Every writer appends to the audit log; tests (and the processes they start) must not write
# the user's own audit log (~/.local/state/quota-console). One throwaway file for the whole
# session, removed after.
_AUDIT_DIR = tempfile.mkdtemp(prefix="quota-audit-")
atexit.register(shutil.rmtree, _AUDIT_DIR, ignore_errors=True)
os.environ["QUOTA_AUDIT_LOG"] = os.path.join(_AUDIT_DIR, "audit.jsonl")


# Under pytest-xdist (`make test` runs two workers: the suite mostly waits on brokers, Spark
# and browsers), each worker starts the session fixtures it needs. Tests of one costly
# fixture go to one worker (--dist loadgroup), so the 3-broker cluster, the settings
# cluster, the SASL broker and the Spark session each start once per run, not once per worker.
_COSTLY_FIXTURES = ("kafka_cluster", "settings_cluster", "kafka_sasl_broker", "spark")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for fixture in _COSTLY_FIXTURES:
            if fixture in names or (fixture == "spark" and any(n.startswith("spark") for n in names)):
                item.add_marker(pytest.mark.xdist_group(fixture))
                break
