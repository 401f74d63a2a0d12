"""``kafka-client-quotas configs``: always the kafka-configs.sh dialect, nothing guessed."""
import io

from quota_core.cli.main import main


def _run(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def test_configs_reads_a_bare_ip_describe_as_kafka_configs_does(tmp_path):
    store = str(tmp_path / "q.sqlite")
    assert _run("--sandbox", store, "--alter", "--ip", "10.9.9.9",
                "--add", "connection_creation_rate=5")[0] == 0
    # The main command keeps its documented reading: --ip is this tool's own flag.
    code, out, _ = _run("--sandbox", store, "--describe", "--ip", "10.9.9.9")
    assert (code, out) == (0, "{ip=10.9.9.9}\nconnection_creation_rate=5\n")
    # `configs` speaks ConfigCommand's dialect.
    code, out, err = _run("configs", "--sandbox", store, "--describe", "--ip", "10.9.9.9")
    assert (code, out, err) == (0, "Quota configs for ip '10.9.9.9' are "
                                   "connection_creation_rate=5.0\n", "")


def test_configs_errors_exit_1_as_configcommand(tmp_path):
    code, out, err = _run("configs", "--sandbox", str(tmp_path / "q.sqlite"), "--describe",
                          "--bogus")
    assert code == 1 and out == "" and "bogus is not a recognized option" in err


def test_unreadable_files_exit_1_as_configcommand(tmp_path):
    """Issue 32: an unreadable --add-config-file exited 2; ConfigCommand (Kafka 4.3.1) prints
    a stack trace and exits 1 for it, for a folder and for a missing --command-config too."""
    store = str(tmp_path / "q.sqlite")
    assert _run("--sandbox", store, "--init")[0] == 0
    alter = ["configs", "--sandbox", store, "--alter", "--entity-type", "users",
             "--entity-name", "u"]
    for argv in ([*alter, "--add-config-file", str(tmp_path / "missing.properties")],
                 [*alter, "--add-config-file", str(tmp_path)],
                 ["configs", "--bootstrap-server", "127.0.0.1:1", "--command-config",
                  str(tmp_path / "missing.properties"), "--describe", "--entity-type",
                  "users"]):
        code, out, err = _run(*argv)
        assert (code, out) == (1, ""), err
        assert err.startswith("Error while executing config command with args ")
        assert len(err.splitlines()) == 2 and "Traceback" not in err
