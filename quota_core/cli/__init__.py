"""The command-line interfaces: thin shells over the core.

``kafka-client-quotas`` (:mod:`.main`), ``plan`` / ``apply`` (:mod:`.plan`), ``collect``
(:mod:`.collect`), the kafka-configs.sh dialect (:mod:`.configs_compat`), the output formats
(:mod:`.output`) and the KIP-546 text forms (:mod:`.spec`).

May import: everything in quota_core below it (core, backends, telemetry, changes). Never ui,
pages or pipeline (the pipeline registers ``analyze`` itself, through the
``quota_console.subcommands`` entry-point group of pyproject.toml).
"""


def __getattr__(name: str):
    # Console scripts installed before the move say ``quota_core.cli:main_entry``; a
    # reinstall (``make venv``) writes ``quota_core.cli.main:main_entry``. Lazy, so that the
    # submodule ``main`` is not shadowed by the function of the same name.
    if name == "main_entry":
        from quota_core.cli.main import main_entry

        return main_entry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
