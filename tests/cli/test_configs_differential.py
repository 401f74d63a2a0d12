"""kafka-configs.sh against kafka-client-quotas's kafka-configs mode, on one real broker.

Every generated command line runs through Kafka 4.3.1's own ``kafka.admin.ConfigCommand``
(many runs in one JVM: ``tests/java/ConfigCommandHarness.java``, compiled here with ``javac``)
and through ``quota_core.cli.main.main``, from the same quota state: the broker state after the
Java run is recorded, the state is put back, ours runs, and stdout, exit code and the
resulting state must be identical. stderr must match too, except where ConfigCommand prints a
stack trace or its whole help text: there its first line must match (we print that line and
one clear line instead). A few command lines are deliberately different (NaN and infinite
values, which ConfigCommand stores and we refuse); those must differ exactly as intended.

Metadata lag: a describe right after an alter may not show it yet, so after each run a
*fence* entity (``{ip=192.0.2.254}``) is set to a new value and awaited; once it shows, so
does everything committed before it.
"""
from __future__ import annotations

import base64
import io
import math
import os
import random
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from localkafka import ensure_jars, tool_argv
from quota_core.cli import main as cli
from quota_core.domain.alterations import Alteration, Op, diff_alteration
from quota_core.backends.open import open_backend
from quota_core.domain.entities import Entity

from tests import TESTS

pytestmark = pytest.mark.kafka

HARNESS = TESTS / "java" / "ConfigCommandHarness.java"
FENCE = Entity.of(ip="192.0.2.254")

USERS = ["alice", "a b", "k=v", "x,y", "ü-名前", "<default>", "100%", "CN=a,OU=b", "-dash",
         "tab\there"]
CLIENTS = ["app", "app x", "c=1", "c,2", "💡", "<default>", "%2F", "a*b~c"]
IPS = ["10.0.0.1", "::1", "localhost", "2001:db8::1"]
LONG_KEYS = ["producer_byte_rate", "consumer_byte_rate"]
DOUBLE_KEYS = ["request_percentage", "controller_mutation_rate"]
VALUES = ["1024", "1e7", "2048.0", "0x1p10", "4096d", " 512 ", "[8192]", "1048576", "10000000",
          "123456789"]
DOUBLE_VALUES = ["12.5", "0.001", "1.5E-4", "99.99", "250", "0.3"]


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    #: Why ours is meant to differ (None: identical).
    deliberate: str | None = None
    #: Run ours as ``kafka-client-quotas configs ARGS`` (a line with no kafka-configs.sh-only
    #: flag, such as ``--help``, is otherwise this tool's own).
    configs: bool = False


class ConfigCommandJVM:
    """The real ConfigCommand, run many times in one JVM (see the harness source)."""

    def __init__(self, workdir: Path) -> None:
        javac = shutil.which("javac", path=os.pathsep.join(
            p for p in (os.path.join(os.environ.get("JAVA_HOME", ""), "bin"),
                        os.environ.get("PATH", "")) if p))
        if javac is None:
            pytest.skip("no javac (a JDK 17+) to compile the ConfigCommand harness")
        libs = ensure_jars()
        subprocess.run([javac, "-d", str(workdir), "-cp", f"{libs}/*", str(HARNESS)],
                       check=True, capture_output=True, timeout=120)
        argv = tool_argv("ConfigCommandHarness")
        argv[argv.index("-cp") + 1] += f"{os.pathsep}{workdir}"
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)

    def run(self, args: tuple[str, ...]) -> tuple[int, str, str]:
        line = "\t".join(base64.b64encode(a.encode()).decode() for a in args) + "\n"
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(line.encode())
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().decode()
        if not answer:
            raise RuntimeError(f"the ConfigCommand harness died (exit {self.proc.poll()})")
        code, out, err = answer.rstrip("\n").split("\t")
        return int(code), base64.b64decode(out).decode(), base64.b64decode(err).decode()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def ours(args: tuple[str, ...]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


# -- the command lines -----------------------------------------------------------------------
def _add(rng: random.Random, keys: list[str]) -> str:
    chosen = rng.sample(keys, k=rng.randint(1, len(keys)))
    return ",".join(f"{k}={rng.choice(DOUBLE_VALUES if k in DOUBLE_KEYS else VALUES)}"
                    for k in chosen)


def _entity_args(rng: random.Random) -> list[str]:
    shape = rng.choice(["user", "user", "client", "pair", "pair", "udefault", "cdefault",
                        "pair-default", "short-user", "short-pair", "short-defaults"])
    user, client = rng.choice(USERS), rng.choice(CLIENTS)
    return {
        "user": ["--entity-type", "users", "--entity-name", user],
        "client": ["--entity-type", "clients", "--entity-name", client],
        "pair": ["--entity-type", "users", "--entity-name", user, "--entity-type", "clients",
                 "--entity-name", client],
        "udefault": ["--entity-type", "users", "--entity-default"],
        "cdefault": ["--entity-type", "clients", "--entity-default"],
        "pair-default": ["--entity-type", "users", "--entity-name", user, "--entity-type",
                         "clients", "--entity-default"],
        "short-user": ["--user", user, "--client", client] if rng.random() < 0.5
        else ["--client", client],
        "short-pair": ["--user", user, "--client-defaults"],
        "short-defaults": ["--user-defaults", "--client", client],
    }[shape]


def generated_cases(bootstrap: str, seed: int = 11) -> list[Case]:
    """Hand-picked edge cases, then seeded random alters/deletes/describes."""
    bs = ("--bootstrap-server", bootstrap)
    cases = [Case((*bs, *rest)) for rest in [
        # describe without a name, before and after changes
        ["--describe", "--entity-type", "users"],
        ["--describe", "--entity-type", "clients"],
        ["--describe", "--entity-type", "ips"],
        # alters with every entity form
        ["--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
         "producer_byte_rate=1024,consumer_byte_rate=1e7"],
        ["--alter", "--entity-type", "users", "--entity-name", "<default>", "--add-config",
         "producer_byte_rate=2048"],
        ["--alter", "--entity-type", "users", "--entity-default", "--add-config",
         "request_percentage=12.5"],
        ["--alter", "--entity-type", "clients", "--entity-name", "x,y", "--entity-type", "users",
         "--entity-name", "k=v", "--add-config", "consumer_byte_rate=[4096]"],
        ["--alter", "--user", "a b", "--client", "c=1", "--add-config",
         "controller_mutation_rate=0.5, request_percentage = 50"],
        ["--alter", "--user-defaults", "--client-defaults", "--add-config",
         "producer_byte_rate=1048576"],
        ["--alter", "--client-defaults", "--add-config", "consumer_byte_rate=2097152"],
        ["--alter", "--ip", "10.0.0.1", "--add-config", "connection_creation_rate=10"],
        ["--alter", "--ip-defaults", "--add-config", "connection_creation_rate=100"],
        ["--alter", "--entity-type", "ips", "--entity-name", "::1", "--add-config",
         "connection_creation_rate=5"],
        ["--alter", "--entity-type", "ips", "--entity-name", "localhost", "--add-config",
         "connection_creation_rate=7"],
        ["--alter", "--entity-type", "users", "--entity-name", "", "--add-config",
         "consumer_byte_rate=4096"],
        ["--alter", "--entity-type", "users", "--entity-name=ü-名前", "--add-config",
         "producer_byte_rate=3000"],
        ["--alter", "--entity-type", "users", "--entity-name", "-dash", "--add-config=producer_byte_rate=77"],
        ["--alter", "--entity-type", "users", "--entity-name", "100%", "--add-config",
         "producer_byte_rate=0x1p20,request_percentage=1e-3"],
        # describe by name, default, all, pairs, and the order of the flags
        ["--describe", "--entity-type", "users"],
        ["--describe", "--entity-type", "clients"],
        ["--describe", "--entity-type", "users", "--entity-type", "clients"],
        ["--describe", "--entity-type", "clients", "--entity-type", "users"],
        ["--describe", "--entity-type", "users", "--entity-name", "alice"],
        ["--describe", "--entity-type", "users", "--entity-name", "<default>"],
        ["--describe", "--entity-type", "users", "--entity-default"],
        ["--describe", "--entity-type", "users", "--entity-name", "k=v", "--entity-type",
         "clients"],
        ["--describe", "--entity-type", "clients", "--entity-name", "x,y", "--entity-type",
         "users", "--entity-name", "k=v"],
        ["--describe", "--user-defaults", "--client-defaults"],
        ["--describe", "--ip-defaults"],
        ["--describe", "--entity-type", "ips", "--entity-name", "10.0.0.1"],
        ["--describe", "--entity-type", "ips"],
        ["--describe", "--entity-type", "users", "--entity-name", "nobody"],
        ["--describe", "--client", "nobody", "--user", "nobody"],
        # deletes: present, absent, several, duplicated, empty tokens
        ["--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config",
         "consumer_byte_rate"],
        ["--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config",
         "consumer_byte_rate"],
        ["--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config",
         "producer_byte_rate,,request_percentage"],
        ["--alter", "--entity-type", "users", "--entity-name", "<default>", "--delete-config",
         "producer_byte_rate", "--delete-config", "producer_byte_rate"],
        ["--alter", "--entity-type", "users", "--entity-name", "<default>", "--add-config",
         "producer_byte_rate=5", "--delete-config", "producer_byte_rate"],
        ["--alter", "--ip", "10.0.0.1", "--delete-config", "connection_creation_rate"],
        # values the broker refuses, or that do not parse
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate=-1"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate=0"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate=1.5"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate=abc"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate="],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate=1e400"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate=1,,consumer_byte_rate=2"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate=1=2"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "produ cer=1"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate=1,"],
        ["--alter", "--entity-type", "clients", "--entity-name", "bob", "--add-config", ","],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config", ","],
        ["--alter", "--user", "bob", "--client", "c", "--add-config", ","],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config", ""],
        ["--alter", "--ip", "10.0.0.1", "--add-config", "connection_creation_rate=1.5"],
        ["--alter", "--ip", "10.0.0.1", "--add-config", "producer_byte_rate=1"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "connection_creation_rate=1"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "foo=1,bar=2"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--delete-config",
         "foo,bar"],
        ["--alter", "--entity-type", "clients", "--entity-name", "bob", "--add-config",
         "foo=1,SCRAM-SHA-256=[password=x]"],
        ["--alter", "--entity-type", "clients", "--entity-name", "bob", "--delete-config",
         "SCRAM-SHA-512,foo"],
        ["--alter", "--user-defaults", "--add-config", "SCRAM-SHA-256=[password=x]"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "SCRAM-SHA-256=[password=x],producer_byte_rate=1"],
        # argument errors, in ConfigCommand's order
        ["--describe", "--entity-type", "foo"],
        ["--describe", "--entity-name", "x"],
        ["--describe", "--entity-type"],
        ["--describe", "--entity-type", "users", "--bogus"],
        ["--describe", "--entity-type", "users", "-x"],
        ["--describe", "-entity-type", "users"],
        ["--describe", "--entity-type", "users", "stray", "words"],
        ["--describe", "--alter", "--entity-type", "users"],
        ["--entity-type", "users"],
        ["--describe", "--add-config", "a=1", "--entity-type", "users"],
        ["--describe", "--delete-config", "a", "--entity-type", "users"],
        ["--describe", "--entity-type", "users", "--entity-type", "users"],
        ["--describe", "--user-defaults", "--entity-type", "users"],
        ["--describe", "--entity-type", "users", "--entity-type", "ips"],
        ["--describe", "--entity-type", "users", "--user", "x"],
        ["--describe", "--entity-type", "users", "--entity-name", "a", "--entity-name", "b"],
        ["--describe", "--user", "a", "--user", "b", "--client-defaults"],
        ["--describe", "--entity-type", "ips", "--entity-name", "no-such-host.invalid"],
        ["--describe", "--entity-type", "ips", "--entity-name", "<default>"],
        ["--alter", "--entity-type", "users", "--add-config", "producer_byte_rate=1"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--entity-type",
         "clients", "--add-config", "producer_byte_rate=1"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate=1", "--add-config", "consumer_byte_rate=1"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate=1", "--add-config-file", "/nonexistent"],
        ["--describe", "--entity-type", "users", "--all"],
        ["--describe", "--entity-type", "topics", "--entity-default"],
        ["--version", "--entity-type", "users"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "request_percentage=NaN"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "request_percentage=Infinity"],
        ["--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
         "producer_byte_rate=Infinity"],
    ]]
    cases.append(Case(("--describe", "--entity-type", "users")))  # no --bootstrap-server
    cases += [Case(("--bootstrap-server", bootstrap, "--bootstrap-controller", bootstrap,
                    "--describe", "--entity-type", "users"))]
    rng = random.Random(seed)
    for _ in range(35):
        roll = rng.random()
        entity = _entity_args(rng)
        if roll < 0.55:
            keys = LONG_KEYS + DOUBLE_KEYS
            cases.append(Case((*bs, "--alter", *entity, "--add-config", _add(rng, keys))))
        elif roll < 0.75:
            deleted = ",".join(rng.sample(LONG_KEYS + DOUBLE_KEYS, k=rng.randint(1, 2)))
            cases.append(Case((*bs, "--alter", *entity, "--delete-config", deleted)))
        else:
            cases.append(Case((*bs, "--describe", *entity)))
        if rng.random() < 0.15:
            cases.append(Case((*bs, "--describe", "--entity-type",
                               rng.choice(["users", "clients"]))))
    cases += [Case((*bs, "--describe", *w)) for w in (
        ["--entity-type", "users"], ["--entity-type", "clients"],
        ["--entity-type", "users", "--entity-type", "clients"], ["--entity-type", "ips"])]
    return [Case(c.args, _deliberate(c.args)) for c in cases]


def file_cases(bootstrap: str, folder: Path) -> list[Case]:
    """--help, no arguments, and the files a user names: readable, missing, a folder (issue 27
    item 8, issue 32: ConfigCommand's help and exit 1 for each error)."""
    bs = ("--bootstrap-server", bootstrap)
    good = folder / "quotas.properties"
    good.write_text("# quotas\nproducer_byte_rate = 4096\nconsumer_byte_rate:8192\n")
    alter = (*bs, "--alter", "--entity-type", "users", "--entity-name", "filed")
    return [Case((), configs=True), Case(("--help",), configs=True),
            Case((*bs, "--describe", "--entity-type", "users", "--help")),
            Case(("--version", "--help"), configs=True),
            Case((*alter, "--add-config-file", str(good))),
            Case((*bs, "--describe", "--entity-type", "users", "--entity-name", "filed")),
            Case((*alter, "--add-config-file", str(folder / "missing.properties"))),
            Case((*alter, "--add-config-file", str(folder))),
            Case((*bs, "--describe", "--entity-type", "users", "--command-config",
                  str(folder / "missing.properties")))]


def _deliberate(args: tuple[str, ...]) -> str | None:
    text = " ".join(args)
    if "NaN" in text or "request_percentage=Infinity" in text:
        return "NaN and infinite values: ConfigCommand stores them, we refuse (exit 1)"
    return None


# -- the state -------------------------------------------------------------------------------
def _same_state(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    return all(a[e].keys() == b[e].keys() and all(
        x == y or (math.isnan(x) and math.isnan(y)) for x, y in
        ((a[e][k], b[e][k]) for k in a[e])) for e in a)


class State:
    """Reads and restores the broker's quota state, fenced against metadata lag.

    The fence (a whole number: it is a connection rate) is ``f`` for both runs of a command,
    ``f + 1`` after the first and ``f + 2`` after the second: each run sees the same fence
    value and each settle waits for a change."""

    def __init__(self, bootstrap: str) -> None:
        self.backend = open_backend(bootstrap_servers=bootstrap, timeout_s=30)

    def _fence(self, value: int) -> Alteration:
        return Alteration(FENCE, (Op.set("connection_creation_rate", 1000 + value),))

    def settled(self, fence: int) -> dict:
        """The state once everything before this call shows (the fence set to ``fence``)."""
        outcome = self.backend.alter([self._fence(fence)])
        assert outcome.ok, outcome.failed
        return {e: q for e, q in self.backend.describe().items() if e != FENCE}

    def restore(self, now: dict, wanted: dict, fence: int) -> None:
        changes = [diff_alteration(e, now.get(e, {}), wanted.get(e, {}))
                   for e in set(now) | set(wanted)]
        outcome = self.backend.alter([c for c in changes if c.ops] + [self._fence(fence)])
        assert outcome.ok, outcome.failed
        assert _same_state({e: q for e, q in self.backend.describe().items() if e != FENCE},
                           wanted)

    def close(self) -> None:
        self.backend.close()


def _stderr_agrees(java: str, mine: str) -> bool:
    """Identical; or where ConfigCommand prints a stack trace or its help, the same first
    line; or where it is silent about doing nothing, only our notes."""
    if java == mine:
        return True
    if java == "" and all(line.startswith(f"{cli.PROG}: note: ") for line in
                          mine.splitlines()):
        return True
    first = java.split("\n", 1)[0]
    return first != "" and mine.split("\n", 1)[0] == first and (
        "\n\tat " in java or "\nOption  " in java)


def test_config_command_and_ours_agree(kafka_broker, tmp_path):
    started = time.monotonic()
    cases = generated_cases(kafka_broker.bootstrap) + file_cases(kafka_broker.bootstrap,
                                                                  tmp_path)
    assert len(cases) >= 100
    jvm = ConfigCommandJVM(tmp_path)
    state = State(kafka_broker.bootstrap)
    identical, deliberate, stderr_exact, stderr_same, problems = 0, [], 0, 0, []
    initial = None
    try:
        fence = 0
        before = initial = state.settled(fence)
        for case in cases:
            java = jvm.run(case.args)
            after_java = state.settled(fence + 1)
            state.restore(after_java, before, fence)
            mine = ours(("configs", *case.args) if case.configs else case.args)
            fence += 2
            after_mine = state.settled(fence)
            same = java[:2] == mine[:2] and _same_state(after_java, after_mine)
            stderr_same += _stderr_agrees(java[2], mine[2])
            stderr_exact += java[2] == mine[2]
            if case.deliberate:
                deliberate.append(case)
                if same or mine[0] != 1 or java[1:] == mine[1:]:
                    problems.append((case, java, mine, "meant to differ"))
            elif same and _stderr_agrees(java[2], mine[2]):
                identical += 1
            else:
                problems.append((case, java, mine, "differs"))
            before = after_mine
    finally:
        jvm.close()
        if initial is not None:  # the broker is shared by the session: leave it as found
            fence += 2
            state.restore(state.settled(fence), initial, fence)
            state.backend.alter([Alteration(FENCE, (Op.remove("connection_creation_rate"),))])
        state.close()
    elapsed = time.monotonic() - started
    print(f"\nkafka-configs differential: {len(cases)} command lines, {identical} identical "
          f"(stdout, exit code, state; stderr agreeing), {len(deliberate)} deliberately "
          f"different; stderr byte-identical on {stderr_exact}, agreeing on {stderr_same}; "
          f"{elapsed:.1f} s")
    detail = "\n".join(f"{why}: {c.args[2:]}\n  java={j!r}\n  ours={m!r}"
                       for c, j, m, why in problems[:10])
    assert not problems, f"{len(problems)} command lines differ:\n{detail}"
