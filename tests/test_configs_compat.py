"""kafka-configs.sh mode, without a broker: parsing, Java formatting, error texts, and whole
commands on a sandbox file. Every expected text below was printed by Kafka 4.3.1's own
ConfigCommand (tests/test_configs_differential.py compares the two on a real broker)."""
from __future__ import annotations

import io
import math

import pytest

from quota_core.cli import main as cli
from quota_core.cli.configs_compat import (CommandFailed, check_args, format_describe,
                                           _FLAGS, _WITH_ARG, help_text, is_configs_command,
                                           parse_configs_to_be_added, parse_options)
from quota_core.java_text import java_double, java_parse_double
from quota_core.entities import Entity


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


# -- which mode -------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, configs_mode", [
    (["--describe", "--entity-type", "users"], True),
    (["--describe", "--entity-type=users"], True),
    (["--describe", "-entity-type", "users"], True),  # jopt-simple takes one dash too
    (["--alter", "--user", "a", "--add-config", "producer_byte_rate=1"], True),
    (["--alter", "--user", "a", "--delete-config", "producer_byte_rate"], True),
    (["--describe", "--client", "app"], True),
    (["--describe", "--user-defaults"], True),
    (["--describe", "--client-defaults"], True),
    (["--describe", "--ip-defaults"], True),
    (["--describe", "--user", "alice"], False),          # KIP-546's --user NAME
    (["--describe", "--ip", "10.0.0.1"], False),
    (["--alter", "--user", "a", "--add", "producer_byte_rate=1MB"], False),
    (["--describe", "--user", "--entity-type"], True),   # a trigger word anywhere
    (["--describe", "--", "--entity-type"], False),      # after --: not an option
])
def test_mode_is_chosen_by_kafka_configs_only_flags(argv, configs_mode):
    assert is_configs_command(argv) is configs_mode


# -- jopt-simple ------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, values, specs", [
    (["--entity-type", "users", "--entity-name", "-x"],
     {"entity-type": ["users"], "entity-name": ["-x"]}, ["entity-type", "entity-name"]),
    (["--entity-name=a=b", "--entity-default", "--entity-name="],
     {"entity-name": ["a=b", ""], "entity-default": []},
     ["entity-name", "entity-default", "entity-name"]),
    (["--delete-config", "a,,b", "--delete-config", ","],
     {"delete-config": ["a", "b", ","]}, ["delete-config"] * 3),
    (["--describe=ignored", "stray", "-", "--", "--bogus"], {"describe": []}, ["describe"]),
    (["-entity-type=ips"], {"entity-type": ["ips"]}, ["entity-type"]),
])
def test_parse_options(argv, values, specs):
    opts = parse_options(argv)
    assert opts.values == values and opts.specs == specs


@pytest.mark.parametrize("argv, message", [
    (["--bogus"], "bogus is not a recognized option"),
    (["--bogus=1"], "bogus is not a recognized option"),
    (["-x"], "x is not a recognized option"),
    (["-xyz=1"], "x is not a recognized option"),
    (["--entity-type"], "Option entity-type requires an argument"),
])
def test_parse_errors(argv, message):
    with pytest.raises(CommandFailed) as info:
        parse_options(argv)
    assert info.value.message == message


# -- Java numbers -----------------------------------------------------------------------------
@pytest.mark.parametrize("value, text", [
    (1024.0, "1024.0"), (1e7, "1.0E7"), (9999999.0, "9999999.0"), (12.5, "12.5"),
    (0.001, "0.001"), (0.0001, "1.0E-4"), (1.5e-4, "1.5E-4"), (123456789.0, "1.23456789E8"),
    (2.0 ** 63, "9.223372036854776E18"), (0.1 + 0.2, "0.30000000000000004"), (0.0, "0.0"),
    (-0.0, "-0.0"), (-2048.0, "-2048.0"), (math.nan, "NaN"), (math.inf, "Infinity"),
    (-math.inf, "-Infinity"), (1048576.0, "1048576.0"), (5e-324, "4.9E-324"),
])
def test_java_double_to_string(value, text):
    assert java_double(value) == text


@pytest.mark.parametrize("text, value", [
    ("1024", 1024.0), (" 1e3\t", 1000.0), ("4096d", 4096.0), ("1.5F", 1.5), ("1.", 1.0),
    (".5", 0.5), ("+7", 7.0), ("0x1p10", 1024.0), ("0X1.8P1", 3.0), ("0x1p3f", 8.0),
    ("NaN", math.nan), ("-Infinity", -math.inf), ("1e400", math.inf), ("abc", None),
    ("", None), ("1_000", None), ("inf", None), ("nan", None), ("1e", None), ("0x1.8", None),
    ("١٢", None), ("1 000", None),
])
def test_java_parse_double(text, value):
    if value is None:
        with pytest.raises(ValueError):
            java_parse_double(text)
    elif math.isnan(value):
        assert math.isnan(java_parse_double(text))
    else:
        assert java_parse_double(text) == value


# -- --add-config -----------------------------------------------------------------------------
_FORMAT = ('requirement failed: Invalid entity config: all configs to be added must be in the '
           'format "key=val" or  "key=[val1,val2]" to group values which contain commas.')


@pytest.mark.parametrize("text, parsed", [
    ("producer_byte_rate=1024", {"producer_byte_rate": "1024"}),
    ("a = 1 , b=[2]", {"a": "1", "b": "2"}),
    ("k=[v1,v2]", {"k": "v1,v2"}),
    ("k=[a=b]", {"k": "a=b"}),
    ("foo=1,bar=2", {"bar": "2", "foo": "1"}),   # java.util.Properties order
    ("k=1,k=2", {"k": "2"}),
    ("k=", {"k": ""}),
    ("k=1,", {"k": "1"}),
    (",", {}),
    ("=5", {"": "5"}),
    ("k=1,,j=2", _FORMAT), ("k=1=2", _FORMAT), ("", _FORMAT), ("k", _FORMAT),
    ("pro ducer=1", "Invalid character found for config key: pro ducer"),
    ("k$x.y_z-1=1", {"k$x.y_z-1": "1"}),
])
def test_add_config(text, parsed):
    opts = parse_options(["--add-config", text])
    if isinstance(parsed, str):
        with pytest.raises(CommandFailed) as info:
            parse_configs_to_be_added(opts)
        assert info.value.message == parsed
    else:
        got = parse_configs_to_be_added(opts)
        assert got == parsed and list(got) == list(parsed)


# -- argument checks --------------------------------------------------------------------------
BS = ["--bootstrap-server", "127.0.0.1:1"]


@pytest.mark.parametrize("argv, message", [
    ([*BS, "--entity-type", "users"], "Command must include exactly one action: --describe, "
                                      "--alter"),
    ([*BS, "--describe", "--alter", "--entity-type", "users"],
     "Command must include exactly one action: --describe, --alter"),
    ([*BS, "--describe", "--add-config", "a=1"],
     'Option "[describe]" can\'t be used with option "[add-config]"'),
    ([*BS, "--describe", "--delete-config", "a"],
     'Option "[describe]" can\'t be used with option "[delete-config]"'),
    ([*BS, "--describe", "--entity-type", "users", "--user-defaults", "--entity-type", "users"],
     "Duplicate entity type(s) specified: users,users"),
    (["--describe", "--entity-type", "users"],
     "Either --bootstrap-server or --bootstrap-controller must be specified."),
    ([*BS, "--describe", "--entity-type", "foo"],
     "Invalid entity type foo, the entity type must be one of topics, clients, users, brokers, "
     "ips, client-metrics, groups, broker-loggers with a --bootstrap-server or "
     "--bootstrap-controller argument"),
    ([*BS, "--describe", "--entity-name", "x"], "At least one entity type must be specified"),
    ([*BS, "--describe", "--entity-type", "users", "--entity-type", "ips"],
     "Only 'users' and 'clients' entity types may be specified together"),
    ([*BS, "--describe", "--entity-type", "users", "--client", "c"],
     "--entity-{type,name,default} should not be used in conjunction with specific entity "
     "flags"),
    ([*BS, "--describe", "--user", "a", "--user", "b"],
     "Found multiple arguments for option user, but you asked for only one"),
    ([*BS, "--bootstrap-controller", "x:1", "--describe", "--entity-type", "users"],
     "Only one of --bootstrap-server or --bootstrap-controller can be specified"),
    ([*BS, "--describe", "--entity-type", "brokers", "--entity-name", "b1"],
     "The entity name for brokers must be a valid integer broker id, but it is: b1"),
    ([*BS, "--describe", "--entity-type", "ips", "--entity-name", "unresolvable"],
     "The entity name for ips must be a valid IP or resolvable host, but it is: unresolvable"),
    ([*BS, "--describe", "--entity-type", "topics", "--entity-default"],
     "--entity-default must not be specified with --describe of topics"),
    ([*BS, "--describe", "--entity-type", "broker-loggers"],
     "An entity name must be specified with --describe of broker-loggers"),
    ([*BS, "--alter", "--entity-type", "users", "--add-config", "a=1"],
     "An entity-name or default entity must be specified with --alter of users, clients, "
     "brokers or ips"),
    ([*BS, "--alter", "--entity-type", "topics", "--add-config", "a=1"],
     "An entity name must be specified with --alter of topics"),
    ([*BS, "--alter", "--user", "u", "--add-config", "a=1", "--add-config-file", "f"],
     "Only one of --add-config or --add-config-file must be specified"),
    ([*BS, "--alter", "--user", "u", "--client", "c"],
     "At least one of --add-config, --add-config-file, or --delete-config must be specified "
     "with --alter"),
])
def test_check_args(argv, message):
    with pytest.raises(CommandFailed) as info:
        check_args(parse_options(argv), resolvable=lambda name: name != "unresolvable")
    assert info.value.message == message


# -- describe output --------------------------------------------------------------------------
def test_describe_lines_follow_java_hashmap_order():
    """As a 4.3.1 broker + ConfigCommand printed these entities (describe of all users)."""
    # Response order (the broker's): it decides only between keys in the same bucket.
    quotas = {
        Entity.of(user="alice"): {"producer_byte_rate": 1024.0},
        Entity.of(user="100%"): {"request_percentage": 0.001, "producer_byte_rate": 1048576.0},
        Entity.of(user="-dash"): {"producer_byte_rate": 77.0},
        Entity.of(user=None): {"producer_byte_rate": 2048.0, "request_percentage": 12.5,
                               "consumer_byte_rate": 4096.0},
        Entity.of(user="bob"): {"request_percentage": math.nan, "producer_byte_rate": 1.0},
        Entity.of(user="<default>"): {"producer_byte_rate": 2048.0},
        Entity.of(user="ü-名前"): {"producer_byte_rate": 3000.0},
    }
    assert format_describe(quotas) == (
        "Quota configs for user-principal 'ü-名前' are producer_byte_rate=3000.0\n"
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0\n"
        "Quota configs for user-principal '<default>' are producer_byte_rate=2048.0\n"
        "Quota configs for user-principal 'bob' are request_percentage=NaN, "
        "producer_byte_rate=1.0\n"
        "Quota configs for user-principal '-dash' are producer_byte_rate=77.0\n"
        "Quota configs for the default user-principal are consumer_byte_rate=4096.0, "
        "producer_byte_rate=2048.0, request_percentage=12.5\n"
        "Quota configs for user-principal '100%' are request_percentage=0.001, "
        "producer_byte_rate=1048576.0\n")


@pytest.mark.parametrize("entity, text", [
    (Entity.of(user="a b", client_id="x,y"), "user-principal 'a b', client-id 'x,y'"),
    (Entity.of(user=None, client_id=None), "the default user-principal, the default client-id"),
    (Entity.of(ip="::1"), "ip '::1'"),
    (Entity.of(ip=None), "the default ip"),
    (Entity.of(client_id="%2F"), "client-id '%2F'"),   # names are printed raw
])
def test_describe_names_entities_raw(entity, text):
    assert format_describe({entity: {"k": 1.0}}) == f"Quota configs for {text} are k=1.0\n"


# -- whole commands on a sandbox file (our --sandbox stands in for --bootstrap-server) ----------
@pytest.fixture
def sb(tmp_path):
    return ["--sandbox", str(tmp_path / "q.sqlite")]


def test_alter_then_describe(sb):
    assert run(*sb, "--alter", "--entity-type", "users", "--entity-name", "alice",
               "--add-config", "producer_byte_rate=1024,consumer_byte_rate=1e7") == (
        0, "Completed updating config for user alice.\n", "")
    assert run(*sb, "--alter", "--user-defaults", "--client", "app x", "--add-config",
               "request_percentage=[12.5]") == (
        0, "Completed updating config for client app x.\n", "")
    assert run(*sb, "--alter", "--entity-type", "users", "--entity-default", "--add-config",
               "producer_byte_rate=2048")[1] == (
        "Completed updating default config for users in the cluster.\n")
    assert run(*sb, "--describe", "--entity-type", "users") == (0, (
        "Quota configs for the default user-principal are producer_byte_rate=2048.0\n"
        "Quota configs for user-principal 'alice' are consumer_byte_rate=1.0E7, "
        "producer_byte_rate=1024.0\n"), "")
    assert run(*sb, "--describe", "--entity-type", "clients", "--entity-type", "users") == (
        0, "Quota configs for the default user-principal, client-id 'app x' are "
           "request_percentage=12.5\n", "")
    assert run(*sb, "--alter", "--user", "alice", "--delete-config", "consumer_byte_rate,"
               "producer_byte_rate")[0] == 0
    assert "alice" not in run(*sb, "--describe", "--entity-type", "users")[1]


def test_alters_are_audited_like_every_writer(sb, tmp_path, monkeypatch):
    from quota_core.changes.audit import AuditLog, os_user

    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(log))
    assert run(*sb, "--alter", "--user", "a=b,c", "--client", "app", "--add-config",
               "producer_byte_rate=1024")[0] == 0
    assert run(*sb, "--alter", "--user", "a=b,c", "--client", "app", "--delete-config",
               "producer_byte_rate")[0] == 0
    first, second = AuditLog(log).read()
    assert first.entity == {"user": "a=b,c", "client-id": "app"}
    assert (first.action, first.before, first.after) == ("alter", {},
                                                         {"producer_byte_rate": 1024})
    assert (second.action, second.before, second.after) == ("delete",
                                                            {"producer_byte_rate": 1024}, {})
    assert first.actor == second.actor == os_user()
    assert first.extra == {"via": "kafka-configs.sh command line"}
    assert first.cluster["kind"] == "sandbox"


def _describe_users(sb) -> str:
    return run(*sb, "--describe", "--entity-type", "users")[1]


def test_an_alter_refuses_when_another_writer_keeps_the_lease(sb, tmp_path, monkeypatch):
    """The configs dialect takes the one write lease (issue 16): while the Edit page holds
    it, an alter waits (here 0.5 s), then refuses naming the holder, with nothing written."""
    from quota_core.cli import configs_compat
    from quota_core.backends.sandbox import SandboxBackend

    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(log))
    monkeypatch.setattr(configs_compat, "LEASE_WAIT_S", 0.5)
    SandboxBackend(sb[1]).init()
    args = ["--alter", "--user", "alice", "--add-config", "producer_byte_rate=1024"]
    with SandboxBackend(sb[1]).write_lease("jdoe on the Edit page", 5):
        code, out, err = run(*sb, *args)
    assert (code, out) == (1, "")
    assert err.startswith(_header(sb, *args)) and err.count("\n") == 2, err
    assert "jdoe on the Edit page" in err and "nothing was written" in err, err
    assert "alice" not in _describe_users(sb)
    assert not log.exists() or log.read_text() == ""


def test_an_alter_waits_for_the_lease_and_applies_once_it_is_free(sb, tmp_path, monkeypatch):
    import threading

    from quota_core.backends.sandbox import SandboxBackend

    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    SandboxBackend(sb[1]).init()
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with SandboxBackend(sb[1]).write_lease("jdoe on the Edit page", 5):
            held.set()
            done.wait(1.0)  # the alter below is waiting for the lease meanwhile

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        code, out, err = run(*sb, "--alter", "--user", "alice", "--add-config",
                             "producer_byte_rate=1024")
    finally:
        done.set()
        holder.join(10)
    assert (code, out, err) == (0, "Completed updating config for user alice.\n", "")
    assert "alice" in _describe_users(sb)


def test_an_alter_writes_its_intent_before_its_outcome(sb, tmp_path, monkeypatch):
    import json

    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(log))
    assert run(*sb, "--alter", "--user", "alice", "--add-config",
               "producer_byte_rate=1024")[0] == 0
    intent, outcome = [json.loads(line) for line in log.read_text().splitlines()]
    assert (intent["phase"], intent["outcome"]) == ("intent", "intent")
    assert intent["after"] == {"producer_byte_rate": 1024} and intent["before"] == {}
    assert (outcome["phase"], outcome["ref"], outcome["outcome"]) == (
        "outcome", intent["id"], "applied")


def test_a_killed_alter_leaves_its_intent(sb, tmp_path):
    """SIGKILL after the change is committed and before the outcome line: the intent is in
    the log (written before sending), read as 'outcome unknown (the writer stopped)'."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from quota_core.changes.audit import WRITER_STOPPED, AuditLog
    from tests.test_writes import _PAUSE_BEFORE_OUTCOME

    log = tmp_path / "audit.jsonl"
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [sys.executable, "-c", _PAUSE_BEFORE_OUTCOME, *sb, "--alter", "--user", "alice",
         "--add-config", "producer_byte_rate=1024"],
        env={**os.environ, "PYTHONPATH": str(root), "QUOTA_AUDIT_LOG": str(log)},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().strip() == "applied"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    assert "producer_byte_rate=1024" in _describe_users(sb)  # the change is in the store
    [record] = AuditLog(log).read()
    assert record.entity == {"user": "alice"} and record.outcome == "unknown"
    assert record.note == WRITER_STOPPED


def test_an_unwritable_audit_log_stops_the_alter_before_anything_is_sent(sb, tmp_path,
                                                                         monkeypatch):
    (tmp_path / "not-a-dir").write_text("")
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "not-a-dir" / "audit.jsonl"))
    code, out, err = run(*sb, "--alter", "--user", "alice", "--add-config",
                         "producer_byte_rate=1024")
    assert code == 1 and out == ""
    assert "audit" in err and "Traceback" not in err
    monkeypatch.delenv("QUOTA_AUDIT_LOG")
    assert "alice" not in run(*sb, "--describe", "--entity-type", "users")[1]


@pytest.mark.parametrize("args, code, out, err", [
    (["--alter", "--user", "bob", "--delete-config", "producer_byte_rate,request_percentage"],
     1, "", "Invalid config(s): producer_byte_rate,request_percentage\n"),
    (["--alter", "--user", "bob", "--add-config", "producer_byte_rate=abc"],
     1, "", "Cannot parse quota configuration value for producer_byte_rate: abc\n"),
    (["--alter", "--user", "bob", "--add-config", "foo=1,bar=2"], 1, "",
     "Only quota and SCRAM credential configs can be added for 'users' using "
     "--bootstrap-server. Unexpected config names: Set(bar, foo)\n"),
    (["--alter", "--user", "bob", "--delete-config", "foo,bar"], 1, "",
     "Only quota and SCRAM credential configs can be deleted for 'users' using "
     "--bootstrap-server. Unexpected config names: ArrayBuffer(foo, bar)\n"),
    (["--alter", "--client", "c", "--add-config", "foo=1,SCRAM-SHA-256=[password=x]"], 1, "",
     "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected "
     "config names: Set(foo, SCRAM-SHA-256)\n"),
    (["--alter", "--ip", "10.0.0.1", "--add-config", "foo=1", "--delete-config", "bar"], 1, "",
     "Only connection quota configs can be added for 'ips' using --bootstrap-server. "
     "Unexpected config names: foo,bar\n"),
    (["--alter", "--user-defaults", "--add-config", "SCRAM-SHA-256=[password=x]"], 1, "",
     "The use of --entity-default or --user-defaults is not allowed with User SCRAM "
     "Credentials using --bootstrap-server.\n"),
    (["--describe", "--entity-type", "users", "--entity-name", "a", "--entity-name", "b"], 1,
     "", "More entity names specified than entity types\n"),
    (["--describe", "--entity-type", "ips", "--entity-name", "::1", "--entity-name", "::2"], 1,
     "", "Found multiple arguments for option entity-name, but you asked for only one\n"),
    (["--alter", "--entity-type", "users", "--entity-name", "a", "--entity-type", "clients",
      "--add-config", "producer_byte_rate=1"], 1, "",
     "An entity name must be specified for every entity type\n"),
    (["--describe", "--entity-type", "users", "--entity-name", "a", "--entity-default"], 1,
     "", "More entity names specified than entity types\n"),
    (["--version", "--entity-type", "users"], 0, "4.3.1\n", ""),
])
def test_configcommand_errors(sb, args, code, out, err):
    assert run(*sb, *args) == (code, out, err)


def _header(sb, *args):
    shown = " ".join([*sb, *args]).replace("password=x", "password=[hidden]")
    return f"Error while executing config command with args '{shown}'\n"


@pytest.mark.parametrize("args, clear", [
    # ConfigCommand: a stack trace (ExecutionException from the broker)
    (["--alter", "--user", "bob", "--add-config", "producer_byte_rate=-1"],
     "the broker refused the change of user-principal 'bob': Quota producer_byte_rate must be "
     "greater than 0"),
    (["--alter", "--user", "bob", "--add-config", "producer_byte_rate=1.5"],
     "the broker refused the change of user-principal 'bob': producer_byte_rate cannot be a "
     "fractional value."),
    # ConfigCommand: stores NaN / infinity (exit 0); deliberately refused here
    (["--alter", "--user", "bob", "--add-config", "request_percentage=NaN"],
     "request_percentage=NaN is not a quota (kafka-configs.sh would store NaN). Give a number "
     "greater than 0; to remove a quota, use --delete-config request_percentage."),
    # ConfigCommand: an IllegalStateException stack trace
    (["--alter", "--user", "bob", "--client", "c", "--add-config", ","],
     "nothing to change: the alteration names no quota key (--add-config/--delete-config are "
     "empty)."),
    # not ours
    (["--alter", "--user", "bob", "--add-config", "SCRAM-SHA-256=[password=x]"],
     "SCRAM credentials (SCRAM-SHA-256) are not managed by kafka-client-quotas: use "
     "kafka-configs.sh or kafka-storage.sh for them."),
    (["--describe", "--entity-type", "topics"],
     "kafka-client-quotas handles client quotas only (--entity-type users, clients or ips); use "
     "kafka-configs.sh for topics."),
    (["--alter", "--user", "bob", "--add-config-file", "/nonexistent/q.properties"],
     "cannot read --add-config-file /nonexistent/q.properties: No such file or directory."),
])
def test_stack_traces_become_one_clear_line(sb, args, clear):
    # exit 1 for each, an unreadable --add-config-file too (ConfigCommand: NoSuchFileException)
    assert run(*sb, *args) == (1, "", _header(sb, *args) + f"kafka-client-quotas: {clear}\n")


def test_an_echoed_command_line_hides_scram_passwords(sb):
    args = ["--alter", "--user", "bob", "--add-config",
            "SCRAM-SHA-512=[iterations=8192,password=FAKEPW-MARKER-42],producer_byte_rate=1"]
    code, out, err = run(*sb, *args)
    assert code == 1 and "FAKEPW-MARKER-42" not in out + err
    args = ["--alter", "--user", "bob", "--add-config", "SCRAM-SHA-256=[password=FAKEPW-1]"]
    code, out, err = run(*sb, *args)
    assert code == 1 and "FAKEPW-1" not in err
    assert "SCRAM-SHA-256=[password=[hidden]]" in err.splitlines()[0]


def test_silent_no_op_gets_a_note(sb):
    code, out, err = run(*sb, "--alter", "--client", "c", "--add-config", ",")
    assert (code, out) == (0, "Completed updating config for client c.\n")
    assert err == ("kafka-client-quotas: note: nothing was changed: --add-config/--delete-config "
                   "name no key (kafka-configs.sh reports this as done).\n")


def test_usage_errors_print_the_message_and_configcommands_help(sb):
    code, out, err = run(*sb, "--describe", "--alter", "--entity-type", "users")
    assert (code, out) == (1, "")
    first, rest = err.split("\n", 1)
    assert first == "Command must include exactly one action: --describe, --alter"
    assert rest == help_text() and rest.startswith("Option  ")


TOOL = ("This tool helps to manipulate and describe entity config for a topic, client, user, "
        "broker, ip, client-metrics or group\n")


@pytest.mark.parametrize("argv", [
    ["configs", "--help"], ["configs"], ["configs", "--help", "--describe", "--entity-type",
                                         "users", "--bootstrap-server", "127.0.0.1:1"],
    ["configs", "--version", "--help"], ["configs", "--help=x"],
    ["--entity-type", "users", "--help"],  # the dialect's trigger, without the subcommand
])
def test_configs_help_is_kafka_configs_help(argv):
    """Issue 27, item 7: ``configs --help`` printed the main usage and an error. As
    ``kafka-configs.sh --help`` (Kafka 4.3.1, checked against the jars): its first line and
    its option table on stderr, nothing on stdout, exit 1."""
    code, out, err = run(*argv)
    assert (code, out, err) == (1, "", TOOL + help_text())
    table = help_text().splitlines()
    assert table[0].split() == ["Option", "Description"] and len(table) == 239
    listed = [line.split()[0][2:] for line in table[2:] if line.startswith("--")]
    # the options the help lists are the ones this dialect parses (and --sandbox, --config,
    # --cluster: ours)
    assert sorted(listed) == sorted((_WITH_ARG | _FLAGS) - {"sandbox", "config", "cluster"})
    assert "--add-config-file <String>" in help_text() and "--sandbox" not in help_text()


def test_bootstrap_controller_is_refused_clearly():
    args = ["--bootstrap-controller", "127.0.0.1:1", "--describe", "--entity-type", "users"]
    code, out, err = run(*args)
    assert (code, out) == (1, "")
    assert err.splitlines()[1] == ("kafka-client-quotas: --bootstrap-controller is not "
                                   "supported: give --bootstrap-server HOST:PORT (quota "
                                   "requests go to brokers).")


def test_add_config_file(sb, tmp_path):
    props = tmp_path / "q.properties"
    props.write_text("# quotas\nproducer_byte_rate = 1024\nconsumer_byte_rate:2048\n")
    assert run(*sb, "--alter", "--user", "f", "--add-config-file", str(props))[0] == 0
    assert run(*sb, "--describe", "--user", "f", "--client-defaults")[1] == ""
    assert run(*sb, "--describe", "--entity-type", "users", "--entity-name", "f")[1] == (
        "Quota configs for user-principal 'f' are consumer_byte_rate=2048.0, "
        "producer_byte_rate=1024.0\n")
