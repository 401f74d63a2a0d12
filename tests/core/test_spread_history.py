"""History per broker (quota_core.analysis.history): the heatmap splits a client by broker where it
was throttled on some brokers only, and one sentence says for how long on each."""
from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd

from quota_core.analysis.history import throttle_heatmap, throttled_by_broker

T0 = datetime(2026, 11, 25, 10)
MiB = 1024 * 1024


def samples(rows):
    return pd.DataFrame([{"ts": T0 + timedelta(minutes=m), "broker": b, "user": u,
                          "client_id": c, "rate": r, "quota": 1 * MiB, "interval_s": 60.0,
                          "over_quota": r > MiB}
                         for m, b, u, c, r in rows])


# carol's leaders all sit on broker 2: over there for 3 h. dave is over on all three brokers.
ROWS = [(m, "2", "carol", None, 1.2 * MiB) for m in range(0, 180)] + \
       [(m, b, "dave", None, 1.5 * MiB) for m in range(0, 30) for b in "123"] + \
       [(m, b, "erin", None, 0.5 * MiB) for m in range(0, 30) for b in "13"]


def test_the_heatmap_splits_a_client_throttled_on_some_brokers_only():
    table = throttle_heatmap(samples(ROWS))
    assert sorted(table.index) == ["carol · any client id · broker 2", "dave · any client id"]
    assert table.loc["carol · any client id · broker 2"].sum() == 180 * 60.0
    assert table.loc["dave · any client id"].sum() == 3 * 30 * 60.0  # broker-seconds


def test_without_a_broker_column_the_heatmap_is_as_before():
    table = throttle_heatmap(samples(ROWS).drop(columns="broker"))
    assert sorted(table.index) == ["carol · any client id", "dave · any client id"]


def test_throttled_on_broker_2_for_3_h():
    frame = samples(ROWS)
    carol = pd.concat([frame[frame["user"] == "carol"],
                       samples([(0, b, "carol", None, 0.1 * MiB) for b in "13"])])
    assert throttled_by_broker(carol) == ("Throttled on broker 2 for 3 h; never on brokers 1 "
                                          "and 3 (each broker enforces on its own).")
    dave = frame[frame["user"] == "dave"]
    assert throttled_by_broker(dave) == ("Throttled on broker 1 for 30 min, on broker 2 for "
                                         "30 min, on broker 3 for 30 min (each broker "
                                         "enforces on its own).")
    erin = frame[frame["user"] == "erin"]
    assert throttled_by_broker(erin) == \
        "Never throttled on brokers 1 and 3 in the recorded samples."
    assert throttled_by_broker(frame.iloc[0:0]) == "No samples recorded."
