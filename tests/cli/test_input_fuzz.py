"""Generated inputs reach every parser of every subcommand, in-process (issue 16, point 7).

``plan``, ``apply``, ``collect``, ``analyze``, ``serve-metrics --listen`` and
``--metrics``/``--throttled`` URLs, through ``main(argv)``: generated URLs, numbers, listen
addresses, YAML/JSON quota files, plan files (valid ones edited, not only argparse
rejections) and broken ``--command-config`` properties files (a JAAS value split over lines
without ``\\``: the password never echoed). Each run: the contract's exit code (2 for a usage
error; 1 for ``plan``, whose 2 means "changes pending"), one line on stderr, never "internal
error", never a traceback. No input reaches a Spark session (``get_session`` fails the test)
and no endpoint is contacted but a closed local port. ``FUZZ_SCALE`` multiplies the counts
(``scripts/fuzz_inputs.py`` runs the long version).
"""
from __future__ import annotations

import json
import os
import socket
import threading
from io import StringIO
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.session
from quota_core import Entity
from quota_core.cli.main import main

from tests.cli_steps import sandbox_with

SCALE = float(os.environ.get("FUZZ_SCALE", "1"))
COUNTS: dict[str, int] = {}


def fuzz(n: int) -> settings:
    return settings(deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck), max_examples=max(1, int(n * SCALE)))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT = closed_port()


@pytest.fixture(scope="module", autouse=True)
def no_spark():
    original = pipeline.session.get_session

    def refuse(*args, **kwargs):
        raise AssertionError("a generated input reached a Spark session")

    pipeline.session.get_session = refuse
    yield
    pipeline.session.get_session = original


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("inputs")
    store = sandbox_with(d / "q.sqlite", {Entity.of(user="a"): {"producer_byte_rate": 5.0},
                                          Entity.of(client_id=None): {"request_percentage": 50.0}})
    want = d / "want.yaml"
    want.write_text("entries:\n- entity: {user: a}\n  quotas: {producer_byte_rate: 10}\n")
    out, err = StringIO(), StringIO()
    assert main(["plan", str(want), "--sandbox", store, "--out", str(d / "plan.json")],
                out, err) == 2, err.getvalue()
    return {"dir": d, "store": store, "plan": (d / "plan.json").read_text()}


def run(kind: str, argv: list[str], usage_code: int) -> None:
    out, err = StringIO(), StringIO()
    code = main(argv, out, err)
    text = err.getvalue()
    COUNTS[kind] = COUNTS.get(kind, 0) + 1
    assert "Traceback" not in text + out.getvalue(), (argv, text)
    assert "internal error" not in text, (argv, text)
    if code == usage_code or code == 1:
        lines = [ln for ln in text.splitlines() if not ln.startswith(("[", "note:", "warning"))]
        assert len(lines) >= 1, (argv, code, text)
    assert code in (0, 1, 2), (argv, code, text)
    if code == 2 and usage_code == 2:
        assert text.count("\n") == 1 or text.startswith("usage:"), (argv, text)


HOSTS = st.sampled_from(["127.0.0.1", "[::1]", "[::1", "::1", "localhost", "", "127.0.0.1%00", "a b",
                         "é", "u:p@h", "[", "]", "%", "\x00", "h\n"])
PORTS = st.one_of(st.sampled_from([str(PORT), "", "abc", "0", "99999", "-1", "1e3", "٣"]),
                  st.integers(-5, 70000).map(str))
URLS = st.one_of(
    st.builds(lambda s, h, p, path: f"{s}://{h}:{p}{path}",
              st.sampled_from(["http", "https", "ftp", "file", "HTTP", ""]), HOSTS, PORTS,
              st.sampled_from(["/metrics", "", "/%00", "/\x00", "/é", "?x=,", "#f"])),
    st.text(max_size=30),
    st.builds(lambda a, b: f"{a},{b}", st.sampled_from([f"b1=http://127.0.0.1:{PORT}/m", ""]),
              st.text(max_size=10)),
)
NUMBERS = st.one_of(st.sampled_from(["0", "-1", "nan", "inf", "1e400", "10" + "0" * 400,
                                     "9" * 5000, "", "--", "0x10", "1_000", "١"]),
                    st.floats().map(repr), st.integers().map(str), st.text(max_size=6))


@fuzz(300)
@given(url=URLS, timeout=st.one_of(st.just("0.5"), NUMBERS),
       mode=st.sampled_from(["throttled", "resolve", "collect", "plan"]),
       joined=st.booleans(), flag=st.sampled_from(["--timeout", "--every", "--status-every"]))
def test_metrics_urls_and_numbers(world, url, timeout, mode, joined, flag):
    store, d = world["store"], world["dir"]
    number = [f"--timeout={timeout}"] if joined else ["--timeout", timeout]  # "=--" is []
    if mode == "collect":
        number = [f"{flag}={timeout}"] if joined else [flag, timeout]
        argv = ["collect", "--sandbox", store, "--metrics", url, "--to", str(d / "hist"),
                *number, "--every", "0.05"]
        # a valid one would run until SIGTERM: keep only what stops at setup
        from quota_core.cli.collect import _check, build_parser
        from quota_core.telemetry.collector import parse_endpoints
        import contextlib
        try:
            with contextlib.redirect_stderr(StringIO()), contextlib.redirect_stdout(StringIO()):
                args = build_parser().parse_args(argv[1:])
            _check(args)
            parse_endpoints(args.metrics)
            return  # valid: nothing to check here (the real process is tested elsewhere)
        except (SystemExit, Exception):  # noqa: BLE001 - main() must report it cleanly
            pass
        run("collect", argv, 2)
    elif mode == "plan":
        run("plan", ["plan", str(d / "want.yaml"), "--sandbox", store, "--metrics", url,
                     *number], 1)
    else:
        extra = ["--throttled"] if mode == "throttled" else ["--resolve", "--user", "a"]
        run("--metrics", ["--sandbox", store, *extra, "--metrics", url, *number], 2)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(10**300, 10**400),
                    st.floats(), st.text(max_size=6),
                    st.sampled_from(["1e400", "NaN", ".inf", "1.0e+400", "0x1F", "1_0"]))
QUOTAS = st.dictionaries(st.sampled_from(["producer_byte_rate", "request_percentage",
                                          "connection_creation_rate", "bogus", ""]),
                         SCALARS, max_size=3)
ENTITY = st.dictionaries(st.sampled_from(["user", "client-id", "ip", "group"]),
                         st.one_of(st.none(), st.text(max_size=5), st.integers()), max_size=2)
DOC = st.one_of(
    st.fixed_dictionaries({"entries": st.lists(st.fixed_dictionaries(
        {"entity": ENTITY, "quotas": QUOTAS}), max_size=3)},
        optional={"format": st.sampled_from(["quota-console/1", "x"]), "extra": SCALARS}),
    st.recursive(SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(
        st.text(max_size=4), c, max_size=3), max_leaves=6))
RAW = st.one_of(st.text(max_size=60),
                st.builds(lambda n, c: c * n, st.integers(50, 3000), st.sampled_from(["[", "{", "- "])),
                st.sampled_from(["entries: [\n - {", "entries:\n\t- x", "a: &x 1\nb: *x",
                                 "<<: {a: 1}", "entries: !!python/object:os.system x",
                                 "\ufeff{}", "entries: [\x01]"]))


def quota_text(doc, raw, fmt) -> str:
    if raw is not None:
        return raw
    if fmt == "json":
        return json.dumps(doc, allow_nan=True)
    import yaml
    try:
        return yaml.safe_dump(doc)
    except yaml.YAMLError:
        return json.dumps(doc, allow_nan=True)


def write_quota_file(path: Path, doc, raw, fmt: str) -> Path:
    """A generated quota file at ``path`` (bytes that are not UTF-8 when the text cannot be)."""
    try:
        path.write_text(quota_text(doc, raw, fmt), encoding="utf-8", errors="surrogatepass")
    except UnicodeEncodeError:
        path.write_bytes(b"\xff")
    return path


@fuzz(300)
@given(doc=DOC, raw=st.one_of(st.none(), RAW), fmt=st.sampled_from(["json", "yaml"]),
       mode=st.sampled_from(["plan", "import", "analyze-quotas", "analyze-what-if"]))
def test_quota_files(world, doc, raw, fmt, mode):
    d, store = world["dir"], world["store"]
    path = write_quota_file(d / f"gen.{fmt}", doc, raw, fmt)
    if mode == "plan":
        run("plan", ["plan", str(path), "--sandbox", store], 1)
    elif mode == "import":
        run("--import", ["--import", str(path), "--validate-only", "--sandbox", store], 2)
    else:  # a valid file stops at the missing --usage folder, before Spark
        flag = "--quotas" if mode == "analyze-quotas" else "--what-if"
        run("analyze", ["analyze", "--usage", str(d / "no-history"), flag, str(path),
                        "--out", str(d / "report")], 2)


@fuzz(150)
@given(doc=DOC, raw=st.one_of(st.none(), RAW), fmt=st.sampled_from(["json", "yaml"]))
def test_lint_refuses_exactly_what_plan_refuses(world, doc, raw, fmt):
    """Issue 32: a CI lint gate passes no file that apply would refuse. ``lint FILE`` and
    ``plan FILE`` read through the one validator: lint exits 1 (an error) exactly when plan
    does, and with the same message after their own prefixes."""
    d, store = world["dir"], world["store"]
    path = write_quota_file(d / f"lint-gen.{fmt}", doc, raw, fmt)
    said = {}
    for kind, argv in (("lint", ["lint", str(path)]), ("plan", ["plan", str(path), "--sandbox", store])):
        out, err = StringIO(), StringIO()
        code = main(argv, out, err)
        COUNTS[kind] = COUNTS.get(kind, 0) + 1
        assert "Traceback" not in err.getvalue() + out.getvalue(), (argv, err.getvalue())
        assert "internal error" not in err.getvalue(), (argv, err.getvalue())
        said[kind] = (code, err.getvalue())
    (lint_code, lint_err), (plan_code, plan_err) = said["lint"], said["plan"]
    assert (lint_code == 1) == (plan_code == 1), said
    if plan_code == 1:  # the same one-line reason, after each command's own prefix
        reason = plan_err.strip().splitlines()[-1].split(": ", 1)[-1]
        assert reason in lint_err, said


PLAN_EDITS = st.one_of(
    st.tuples(st.just("value"), st.one_of(NUMBERS, st.sampled_from(["null", "true", '"5"', "[]"]))),
    st.tuples(st.just("key"), st.sampled_from(['"bogus"', '""', "1", "null"])),
    st.tuples(st.just("hash"), st.sampled_from(['"sha256:00"', "null", "1"])),
    st.tuples(st.just("raw"), RAW),
    st.tuples(st.just("cut"), st.integers(0, 3000).map(str)),
)


@fuzz(300)
@given(edit=PLAN_EDITS)
def test_plan_files_for_apply(world, edit):
    d, store, plan = world["dir"], world["store"], world["plan"]
    what, value = edit
    if what == "value":
        text = plan.replace('"value": 10', f'"value": {value}')
    elif what == "key":
        text = plan.replace('"key": "producer_byte_rate",\n          "value"', f'"key": {value},\n          "value"')
    elif what == "hash":
        text = plan.replace('"hash": "sha256:', f'"hash": {value}, "x": "', 1)
    elif what == "raw":
        text = value
    else:
        text = plan[:int(value)]
    path = d / "gen-plan.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    run("apply", ["apply", str(path), "--sandbox", store, "--audit-log",
                  str(d / "audit.jsonl")], 2)


@fuzz(300)
@given(start=st.one_of(st.none(), NUMBERS, st.sampled_from(["2025-01-01", "2025-13-01", "Z"])),
       end=st.one_of(st.none(), NUMBERS, st.sampled_from(["2025-01-02", "2024-01-01"])),
       usage=st.one_of(st.sampled_from(["kafka:", "kafka:t", "s3a://b/x", ""]), st.text(max_size=8)),
       timeout=st.one_of(st.none(), NUMBERS),
       extra=st.sampled_from([[], ["--command-config", "/nonexistent"], ["--kafka-bootstrap", ""],
                              ["--overwrite"], ["--bogus"]]))
def test_analyze_arguments(world, start, end, usage, timeout, extra):
    d = world["dir"]
    if usage.startswith("kafka:") and "--kafka-bootstrap" not in extra and \
            "--command-config" not in extra:
        extra = [*extra, "--command-config", "/nonexistent"]  # never a real cluster
    if "://" in usage or (not usage.startswith("kafka:") and Path(usage).is_dir()):
        usage = str(d / "no-history")  # a real folder or a remote path would go to Spark
    argv = ["analyze", "--usage", usage, "--out", str(d / "report"), *extra]
    for flag, value in (("--from", start), ("--to", end), ("--timeout", timeout)):
        if value is not None:
            argv += [f"{flag}={value}"]
    run("analyze", argv, 2)


# -- properties files (issue 32, finding 5): a broken file never echoes a secret -------------
SECRET = "FAKEPW-MARKER-42"
JAAS_MODULES = ["org.apache.kafka.common.security.scram.ScramLoginModule",
                "org.apache.kafka.common.security.plain.PlainLoginModule", "Bogus"]
#: Lines that hold the secret, as people write them (whole: split only between tokens).
SECRET_LINES = st.sampled_from([f"sasl.password={SECRET}", f"ssl.key.password = {SECRET}",
                                f"ssl.keystore.password:{SECRET}", f"sasl.password {SECRET}"])
OTHER_LINES = st.one_of(
    st.sampled_from(["security.protocol=SASL_PLAINTEXT", "security.protocol=SSL",
                     "sasl.mechanism=SCRAM-SHA-256", "sasl.mechanism=PLAIN",
                     "sasl.username=alice", "client.id=ops", "retries=3", "# a comment",
                     "sasl.mechansim=PLAIN", "request.timeout.ms=soon", "", "\\", "=x", ":",
                     "ssl.ca.location=/nonexistent/ca.pem", "bootstrap.servers=127.0.0.1:1"]),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=20).filter(
        lambda t: SECRET not in t))


@st.composite
def jaas_lines(draw) -> list[str]:
    """sasl.jaas.config, maybe split over lines, with or without the ``\\`` it needs. A
    split falls between tokens, or between ``password=`` and its value (the issue's file:
    the next line then starts with the password)."""
    tokens = [(draw(st.sampled_from(JAAS_MODULES)), " "),
              (draw(st.sampled_from(["required", "optional", "x"])), " ")]
    options = draw(st.permutations(["user", "quoted", "bare"]))[:draw(st.integers(1, 3))]
    for option in options:
        if option == "user":
            tokens.append(('username="alice"', " "))
        else:
            value = f'"{SECRET}"' if option == "quoted" else SECRET
            tokens += [("password=", " "), (value, "")]  # "" : no space after the '='
    end = draw(st.sampled_from([";", "", " ;", ";;"]))
    cuts = draw(st.sets(st.integers(1, len(tokens) - 1), max_size=3))
    backslash = draw(st.sampled_from(["", "\\", "mixed"]))
    lines, current = [], "sasl.jaas.config=" + tokens[0][0]
    for i, (token, joiner) in enumerate(tokens[1:], 1):
        if i in cuts:
            tail = backslash if backslash != "mixed" else draw(st.sampled_from(["", "\\"]))
            lines.append(current + (" " + tail if tail else ""))
            current = draw(st.sampled_from(["    ", "", "\t"])) + token
        else:
            current += joiner + token
    return [*lines, current + end]


@fuzz(200)
@given(before=st.lists(OTHER_LINES, max_size=4), jaas=st.one_of(st.none(), jaas_lines()),
       secret=st.one_of(st.none(), SECRET_LINES), after=st.lists(OTHER_LINES, max_size=3),
       newline=st.sampled_from(["\n", "\r\n", "\r"]),
       reader=st.sampled_from(["main", "configs", "serve-metrics"]))
def test_properties_files(world, before, jaas, secret, after, newline, reader):
    """Generated broken --command-config files: 0 tracebacks, 0 echoed secrets, the usual
    one-line errors; a line that is not a property is named by its number."""
    from quota_core.backends.kafka_config import load_command_config
    from quota_core.errors import QuotaError

    lines = [*before, *(jaas or []), *([secret] if secret else []), *after]
    path = world["dir"] / "client.properties"
    path.write_text(newline.join(lines), encoding="utf-8")
    try:
        load_command_config(path)
        return  # a valid file: nothing to refuse (it would go on to connect)
    except QuotaError as exc:
        assert SECRET not in str(exc) and SECRET not in repr(exc.context), lines
    bootstrap = f"127.0.0.1:{PORT}"
    argv = {"main": ["--bootstrap-server", bootstrap, "--command-config", str(path),
                     "--describe", "--timeout", "0.5"],
            "configs": ["configs", "--bootstrap-server", bootstrap, "--command-config",
                        str(path), "--describe", "--entity-type", "users"],
            "serve-metrics": ["serve-metrics", "--bootstrap-server", bootstrap,
                              "--command-config", str(path), "--listen", "127.0.0.1:0",
                              "--timeout", "0.5"]}[reader]
    out, err = StringIO(), StringIO()
    code = main(argv, out, err)
    text = out.getvalue() + err.getvalue()
    COUNTS["properties"] = COUNTS.get("properties", 0) + 1
    assert SECRET not in text, (lines, text)
    assert "Traceback" not in text and "internal error" not in text, (lines, text)
    assert code in (1, 2), (lines, code, text)
    assert err.getvalue().count("\n") == (2 if reader == "configs" else 1), text


def test_a_jaas_value_split_without_backslashes_names_lines_not_the_password(tmp_path):
    """Issue 32, finding 5: the password line became a "property name", printed in the error
    ("Unknown Kafka client property … FAKEPW-MARKER-42")."""
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                    f'required\n    username="alice"\n    {SECRET}";\n')
    for argv in (["--bootstrap-server", f"127.0.0.1:{PORT}", "--command-config", str(path),
                  "--describe"],
                 ["configs", "--bootstrap-server", f"127.0.0.1:{PORT}", "--command-config",
                  str(path), "--describe", "--entity-type", "users"]):
        out, err = StringIO(), StringIO()
        # a malformed file the user gave: a usage error (2), except in the kafka-configs.sh
        # dialect, which exits 1 for every error as ConfigCommand does
        assert main(argv, out, err) == (1 if argv[0] == "configs" else 2)
        assert SECRET not in err.getvalue() and "alice" not in err.getvalue()
        assert (f"In {path}, lines 4 and 5 are not Kafka client properties (the text is not "
                f"shown: it may hold a secret). sasl.jaas.config (line 3) does not end with "
                f"';': if its value goes on over the next lines, end each line but the last "
                f"with \\.") in err.getvalue()


LISTEN_HOSTS = st.one_of(
    st.sampled_from(["127.0.0.1", "[::1]", "localhost", "", "..", "%", "a\x01b", "[", "]", "[]",
                     "999.1.1.1", "a" * 70, "::1", "[::1%\x01]", "é", "0.0.0.0", "-a", "a_b"]),
    st.text(max_size=12))
LISTEN_PORTS = st.one_of(st.sampled_from(["0", "", "²", "٠", "０", "65536", "-1", "+1", "1e3",
                                          "0x10", "000000", " 1"]), st.text(max_size=6),
                         st.integers(-5, 70000).map(str))


@fuzz(300)
@given(host=LISTEN_HOSTS, port=LISTEN_PORTS, sep=st.sampled_from([":", "", "::"]))
def test_serve_metrics_listen_values(world, host, port, sep):
    """Generated --listen values: a malformed one exits 2 in one line naming it, without a
    name lookup; a well-formed one is never served here (nothing listens in this test)."""
    import socket

    from quota_core.errors import ParseError
    from quota_core.telemetry.exporter import parse_listen

    value = f"{host}{sep}{port}"
    COUNTS["serve-metrics"] = COUNTS.get("serve-metrics", 0) + 1

    here = threading.current_thread()

    def refusing(real):
        def lookup(*args, **kwargs):
            if threading.current_thread() is not here:  # another test's thread (a live feed)
                return real(*args, **kwargs)
            raise AssertionError(f"a name lookup for --listen {value!r}")
        return lookup

    with pytest.MonkeyPatch.context() as patch:
        for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex"):
            patch.setattr(socket, name, refusing(getattr(socket, name)))
        try:
            got_host, got_port = parse_listen(value)
        except ParseError:
            pass
        else:  # well-formed: ASCII digits, a host as given (or the loopback default)
            assert 0 <= got_port < 65536 and got_host.isascii() and got_host.isprintable()
            return
        out, err = StringIO(), StringIO()
        code = main(["serve-metrics", "--sandbox", world["store"], f"--listen={value}"],
                    out, err)
    text = err.getvalue()
    assert code == 2, (value, text)
    assert text.count("\n") == 1 and text.startswith(
        f"kafka-client-quotas serve-metrics: error: --listen {value!r}: "), (value, text)
    assert "Traceback" not in text and "internal error" not in text


def test_fuzz_reached_every_subcommand():
    """Runs last: every kind ran (≥ 1,000 inputs in all at FUZZ_SCALE=1)."""
    if os.environ.get("FUZZ_REPORT"):
        print(f"\ninput fuzz: {COUNTS}")
    assert {"plan", "apply", "collect", "analyze", "--metrics", "--import", "properties",
            "serve-metrics", "lint"} <= set(COUNTS)
    assert sum(COUNTS.values()) >= 1000 * min(SCALE, 1) * 0.9
