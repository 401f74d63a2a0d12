"""The long run of the input generators (issue 16): ``make faults`` runs it, ``make test``
keeps the short one (tests/cli/test_input_fuzz.py and tests/cli/test_cli_fuzz.py at their CI counts).

    python scripts/fuzz_inputs.py [SCALE]     # default 20: about 24,000 generated inputs

Every subcommand's parsers (plan, apply, collect, analyze, serve-metrics --listen,
--metrics/--throttled URLs, quota and plan files, broken --command-config properties files
whose password must never be echoed) in-process, no Spark session, no endpoint but a closed
local port, nothing listening. Prints the counts per subcommand; exit status is pytest's.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    scale = argv[0] if argv else "20"
    env = {**os.environ, "FUZZ_SCALE": scale, "FUZZ_REPORT": "1",
           "FUZZ_ARGV": str(int(1000 * float(scale))), "FUZZ_IMPORT": str(int(500 * float(scale))),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.call([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                            "tests/cli/test_input_fuzz.py", "tests/cli/test_cli_fuzz.py", "-k",
                            "fuzz"], cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
