"""Dashboard speed with 100,000 quota entries: server-side render time of Browse and Resolve.

Each figure is a whole script run in ``streamlit.testing.v1.AppTest`` (entry script, sidebar,
page, the table handed to Streamlit), after a widget change, on a sandbox file holding
100,000 entries; the median of ``--runs`` runs is printed with the target. The baseline is a
run of the Audit page (no quota data) in the same process, so the ratio shows what the quota
work itself costs. The pure functions behind each page are timed on their own too.

    .venv/bin/python benchmarks/bench_dashboard.py [--entries 100000] [--runs 5]

Targets: a Browse filter change under 1 s, a resolve under 200 ms.
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from quota_core import Entity, resolve  # noqa: E402
from ui.browse import (BrowseFilter, TypeMatch, display_frame, filter_frame, level_counts,  # noqa: E402
                       quota_frame)

MiB = 1024 * 1024


def synthetic_quotas(n: int, seed: int = 7) -> dict[Entity, dict[str, float]]:
    """``n`` entries in a plausible mix of ladder shapes (most per user+client pair)."""
    rnd = random.Random(seed)
    users = [f"user-{i:06d}" for i in range(max(n // 3, 1))]
    clients = [f"app-{i:06d}" for i in range(max(n // 3, 1))]
    shapes = (("uc", 0.55), ("u", 0.2), ("ud", 0.08), ("dc", 0.06), ("c", 0.1), ("ip", 0.01))
    quotas: dict[Entity, dict[str, float]] = {
        Entity.of(user=None): {"producer_byte_rate": 1.0 * MiB, "consumer_byte_rate": 2.0 * MiB},
        Entity.of(client_id=None): {"request_percentage": 25.0},
        Entity.of(ip=None): {"connection_creation_rate": 100.0},
    }
    while len(quotas) < n:
        r, shape = rnd.random(), "uc"
        for shape, p in shapes:
            r -= p
            if r <= 0:
                break
        u, c = rnd.choice(users), rnd.choice(clients)
        if shape == "ip":
            e = Entity.of(ip=f"10.{rnd.randrange(256)}.{rnd.randrange(256)}.{rnd.randrange(1, 255)}")
            quotas[e] = {"connection_creation_rate": float(rnd.choice((5, 10, 20, 50)))}
            continue
        e = {"uc": lambda: Entity.of(user=u, client_id=c), "u": lambda: Entity.of(user=u),
             "ud": lambda: Entity.of(user=u, client_id=None),
             "dc": lambda: Entity.of(user=None, client_id=c),
             "c": lambda: Entity.of(client_id=c)}[shape]()
        q: dict[str, float] = {}
        if rnd.random() < 0.8:
            q["producer_byte_rate"] = float(rnd.choice((256 * 1024, MiB, 8 * MiB, 10_000_000)))
        if rnd.random() < 0.6:
            q["consumer_byte_rate"] = float(rnd.choice((512 * 1024, 4 * MiB, 20_000_000)))
        if rnd.random() < 0.3 or not q:
            q["request_percentage"] = float(rnd.choice((25, 50, 100, 200)))
        quotas[e] = q
    return quotas


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def report(name: str, samples: list[float], target_ms: float | None, baseline_ms: float) -> bool:
    ms = median_ms(samples)
    ok = target_ms is None or ms < target_ms
    target = f"target < {target_ms:,.0f} ms {'ok' if ok else 'MISSED'}" if target_ms else ""
    print(f"  {name:<44} {ms:8.1f} ms   ({ms / baseline_ms:4.1f}x baseline)   {target}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("streamlit").setLevel(logging.ERROR)

    from quota_core.backends.sandbox import SandboxBackend
    from streamlit.testing.v1 import AppTest

    quotas = synthetic_quotas(args.entries)
    some = [e for e in quotas if len(e.parts) == 2 and None not in dict(e.parts).values()][:50]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        with SandboxBackend(path) as backend:
            backend.replace_all(quotas)
        for var in [v for v in os.environ if v.startswith("QUOTA_")]:
            del os.environ[var]
        os.environ.update(QUOTA_SANDBOX=str(path), QUOTA_AUDIT_LOG=str(Path(tmp) / "a.jsonl"),
                          QUOTA_CACHE_TTL="3600")

        def app(page: str | None = None) -> AppTest:
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
            at.secrets["_bench"] = "1"
            at.run()
            if page:
                at.switch_page(page).run()
            assert not at.exception, [e.value for e in at.exception]
            return at

        print(f"Dashboard with {len(quotas):,} quota entries (sandbox file), median of "
              f"{args.runs} runs")
        first = timed(lambda: app())
        print(f"  first load: describe + Browse frame + Resolve page  {first * 1000:8.1f} ms "
              f"(once per cache TTL / after a change)")

        audit = app("pages/audit.py")
        baseline = median_ms([timed(audit.run) for _ in range(args.runs)])
        print(f"  {'baseline: Audit page rerun (no quota data)':<44} {baseline:8.1f} ms")
        ok = True

        browse = app("pages/browse.py")
        changes = [
            ("Browse: user = exact name", lambda: (
                browse.selectbox(key="br_user_mode").set_value("exact"),
                browse.run(),
                browse.text_input(key="br_user_name").input("user-000123"),
            )),
            ("Browse: client-id = any, strict", lambda: (
                browse.selectbox(key="br_user_mode").set_value("unset"),
                browse.selectbox(key="br_client_id_mode").set_value("any"),
                browse.checkbox(key="br_strict").check(),
            )),
            ("Browse: search 'user-00'", lambda: (
                browse.checkbox(key="br_strict").uncheck(),
                browse.selectbox(key="br_client_id_mode").set_value("unset"),
                browse.text_input(key="br_search").input("user-00"),
            )),
            ("Browse: everything, sort by producer desc", lambda: (
                browse.text_input(key="br_search").input(""),
                browse.selectbox(key="br_sort").set_value("producer_byte_rate"),
                browse.toggle(key="br_desc").set_value(True),
            )),
            ("Browse: level 3 only", lambda: browse.pills(key="br_levels").set_value(["3"])),
        ]
        for name, change in changes:
            samples = []
            for _ in range(args.runs):
                browse.pills(key="br_levels").set_value([])
                browse.run()
                change()
                samples.append(timed(browse.run))
                assert not browse.exception, [e.value for e in browse.exception]
            ok &= report(name, samples, 1000, baseline)

        resolver = app()
        samples = []
        for i in range(args.runs * 4):
            e = some[i % len(some)]
            d = dict(e.parts)
            resolver.text_input(key="rs_user").input(d["user"])
            resolver.text_input(key="rs_client").input(d["client-id"])
            samples.append(timed(resolver.run))
            assert not resolver.exception
        ok &= report("Resolve: a user + client id (whole page)", samples, 200, baseline)

        print("Pure functions behind the pages:")
        frame = quota_frame(quotas)
        for name, spec in (("filter+counts+display: everything", BrowseFilter()),
                           ("filter+counts+display: search 'user-00'",
                            BrowseFilter(search="user-00")),
                           ("filter+counts+display: user exact",
                            BrowseFilter(user=TypeMatch("exact", "user-000123")))):
            def page_work(spec=spec):
                shown = filter_frame(frame, spec)
                level_counts(shown)
                display_frame(shown)

            samples = [timed(page_work) for _ in range(args.runs)]
            report(name, samples, None, baseline)
        samples = [timed(lambda e=e: resolve(quotas, dict(e.parts)["user"],
                                             dict(e.parts)["client-id"])) for e in some]
        report("resolve() one client", samples, None, baseline)
        report("quota_frame() (once per describe)", [timed(lambda: quota_frame(quotas))],
               None, baseline)
    print("all targets met" if ok else "SOME TARGETS MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
