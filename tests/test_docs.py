"""The docs (issue 28, "Docs a person can read"): a short README that links into docs/, a docs
site that MkDocs builds in strict mode, a CLI reference that names every flag and subcommand
(as sqlite-utils' docs do), exit code tables equal to the code's one map, and no code comment
that cites a file outside the repository."""
from __future__ import annotations

import contextlib
import io
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from quota_core.cli import configs_compat, console
from quota_core.cli.exits import EXIT_CODES
from quota_core.cli.main import main as cli_main, subcommand_lines
from quota_core.errors import OutcomeUnknown, ParseError, QuotaError, UnreadableFile, UsageError

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
README = REPO / "README.md"
CLI_PAGE = DOCS / "cli.md"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(site)],
                          capture_output=True, text=True, timeout=120)


# --- the site ---------------------------------------------------------------------------------

def test_the_docs_build_in_strict_mode_with_every_page_in_the_nav(tmp_path):
    done = _mkdocs(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    for page in DOCS.glob("*.md"):
        name = "index.html" if page.stem == "index" else f"{page.stem}/index.html"
        assert (tmp_path / "site" / name).is_file(), page
    assert (tmp_path / "site" / "img" / "resolve.png").is_file()


def test_a_broken_link_or_a_page_left_out_of_the_nav_fails_the_build(tmp_path):
    """The strict build is what catches them: a copy of the docs with one broken link, then
    with one page that no nav entry names, does not build."""
    for damage in ("link", "nav"):
        root = tmp_path / damage
        shutil.copytree(DOCS, root / "docs")
        shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
        if damage == "link":
            with open(root / "docs" / "cli.md", "a", encoding="utf-8") as f:
                f.write("\nSee [the missing page](no-such-page.md).\n")
        else:
            (root / "docs" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
        done = _mkdocs(root / "mkdocs.yml", root / "site")
        assert done.returncode != 0, damage
        assert ("no-such-page.md" if damage == "link" else "orphan.md") in done.stderr


# --- the README -------------------------------------------------------------------------------

def test_the_readme_is_short_and_links_into_the_docs():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 160
    assert text.index("make run") < text.index("make test") < 1200  # the two commands first
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#[^)]*)?\)", text)
    assert len(set(links)) >= 8, links
    for link in links:
        assert (REPO / link).is_file(), f"README links to {link}, which does not exist"
    assert "docs/img/resolve.png" in text
    png = (DOCS / "img" / "resolve.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000


# --- the CLI reference ------------------------------------------------------------------------

def _help(argv: list[str]) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli_main(argv, out, err)
        except SystemExit:
            pass
    return out.getvalue() + err.getvalue()


def _sections(text: str) -> dict[str, str]:
    """The CLI page's reference sections: '### `COMMAND`' -> its text."""
    parts = re.split(r"^### `([^`]+)`\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def _commands() -> dict[str, set[str]]:
    """Every command and subcommand with the flags its own --help lists."""
    commands = {"kafka-client-quotas": set(FLAG.findall(_help(["--help"])))}
    for name, _ in subcommand_lines():
        commands[f"kafka-client-quotas {name}"] = set(FLAG.findall(_help([name, "--help"])))
    # configs reads kafka-configs.sh's own flags by hand: every one it recognises
    commands["kafka-client-quotas configs"] |= {
        f"--{f}" for f in configs_compat._WITH_ARG | configs_compat._FLAGS}
    commands["quota-console"] = set(FLAG.findall(console.build_parser().format_help()))
    return commands


def test_every_subcommand_and_flag_is_in_the_cli_reference():
    sections = _sections(CLI_PAGE.read_text(encoding="utf-8"))
    commands = _commands()
    assert {"plan", "apply", "lint", "collect", "serve-metrics", "configs", "analyze"} <= {
        c.split()[-1] for c in commands}
    missing = {}
    for command, flags in commands.items():
        assert command in sections, f"docs/cli.md has no section ### `{command}`"
        documented = set(FLAG.findall(sections[command]))
        if flags - documented:
            missing[command] = sorted(flags - documented)
    assert not missing, f"flags missing from their section of docs/cli.md: {missing}"


def test_the_cli_reference_names_no_flag_a_command_does_not_have():
    """The reverse: a flag removed from the code does not linger in its table's first column."""
    sections = _sections(CLI_PAGE.read_text(encoding="utf-8"))
    for command, flags in _commands().items():
        table_flags = set()
        for line in sections[command].splitlines():
            if line.startswith("| `--"):
                table_flags |= set(FLAG.findall(line.split("|")[1]))
        assert table_flags <= flags | {"--help"}, (command, sorted(table_flags - flags))


# --- exit code tables -------------------------------------------------------------------------

#: What a cell must say for the error class that EXIT_CODES maps to its column.
_WORDS = {UsageError: ("usage",), ParseError: ("usage",), OutcomeUnknown: ("outcome unknown",),
          QuotaError: ("refused", "failure"), BaseException: ("any error",),
          UnreadableFile: ("unreadable",)}
#: Statuses that are a command's result, not an error (returned by the command itself).
_RESULTS = {"plan": {2: "changes pending"}, "diff": {2: "they differ"}, "lint": {2: "findings"}}
STATUSES = ["0", "1", "2", "3"]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _tables(text: str):
    """Every markdown table: (header cells, rows of cells)."""
    lines, i = text.splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            header, rows, i = _cells(lines[i]), [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            yield header, rows
        else:
            i += 1


def _exit_tables():
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for header, rows in _tables(page.read_text(encoding="utf-8")):
            if header[0].lower() in ("exit", "command", "subcommand") or header[1:] == STATUSES:
                yield page.name, header, rows


def _commands_in(cell: str) -> list[str]:
    names = [n for n in re.findall(r"`([a-z-]+)`", cell) if n in EXIT_CODES]
    return (["main"] if "main command" in cell else []) + names


def test_every_exit_code_table_matches_EXIT_CODES():
    seen, checked = set(), 0
    for page, header, rows in _exit_tables():
        if header == ["exit", "meaning"]:  # the main command's own table
            codes = {int(row[0]): row[1].lower() for row in rows}
            errors = {status for _, status in EXIT_CODES["main"]}
            # besides the errors: 0, and the shell's status for a signal (128 + SIGINT/SIGTERM)
            signals = {c for c in codes if c > 128 and c - 128 in (signal.SIGINT, signal.SIGTERM)}
            assert set(codes) - signals == {0} | errors, (page, sorted(codes))
            assert 128 + signal.SIGINT in signals and "interrupted" in codes[130]
            for cls, status in EXIT_CODES["main"]:
                assert any(w in codes[status] for w in _WORDS[cls]), (page, cls, codes[status])
            checked += 1
            continue
        assert header[1:] == STATUSES, f"{page}: an exit table of unknown shape {header}"
        for row in rows:
            commands = _commands_in(row[0])
            assert commands, f"{page}: an exit table row that names no command: {row[0]}"
            for command in commands:
                seen.add(command)
                cells = {int(h): c.lower() for h, c in zip(header[1:], row[1:])}
                errors = {}
                for cls, status in EXIT_CODES[command]:
                    errors.setdefault(status, cls)
                for status in (1, 2, 3):
                    cell = cells[status]
                    if status in errors:
                        words = _WORDS[errors[status]]
                        assert any(w in cell for w in words), (page, command, status, cell, words)
                    elif status in _RESULTS.get(command, {}):
                        assert _RESULTS[command][status] in cell, (page, command, status, cell)
                    else:
                        assert cell == "—", (page, command, status, cell)
                checked += 1
    assert seen == set(EXIT_CODES), f"commands with no exit code row: {set(EXIT_CODES) - seen}"
    assert checked >= len(EXIT_CODES) + 1


def test_the_interfaces_page_has_one_row_for_every_command():
    text = (DOCS / "interfaces.md").read_text(encoding="utf-8")
    named = set()
    for header, rows in _tables(text):
        if header[1:] == STATUSES:
            for row in rows:
                named |= set(_commands_in(row[0]))
    assert named == set(EXIT_CODES)


# --- citations --------------------------------------------------------------------------------

def _python_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    return [REPO / p for p in listed.stdout.split()]


@pytest.mark.parametrize("needle", ["CONTRACTS", "../shared", "shared/"])
def test_no_python_file_cites_a_file_outside_the_repository(needle):
    me = Path(__file__).resolve()
    hits = [f"{p.relative_to(REPO)}:{n}" for p in _python_files() if p.resolve() != me
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
            if needle in line]
    assert not hits, f"{needle!r} cited in: {hits}"
