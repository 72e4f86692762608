#!/usr/bin/env python3
"""stamps.py DIR... - medians of the steps of a short-message round trip
from the stamps.PID files stamps.sh collects (one DIR per process; the
DIR's name says which: ripc-cli, raw-srv, ...).  Rows 20 000-140 000 (the
warm-up left out).  Points (stamps.patch):
  0 ripc_send_short entered     1 API lock taken (api_send)
  2 fi_inject called            3 fi_inject returned
  4 ripc_send_short returns     5 fi_cq_read returned a completion
  8 the pass handled it         9 the pass's transport loop ended
  6 the receive took the message (ripc__msg_take)
  7 ripc_receive returns
  10, 11 the starts of the read of the same CQ before the one that
         returned the completion (5), and of that one: the spin's
         period (libripc polls shm's and tcp's CQs in one pass; each
         CQ's reads are timed apart), and how long the read took
The raw program stamps 2, 3 and 5 only (its fi_recv repost lies between 5
and the next 2).  This VM's TSC reads advance in steps of 26 cycles
(10 ns): medians come in tens of ns, the trimmed means say more."""
import glob
import os
import statistics as st
import sys

STEPS = [  # name, from (row, col), to (row, col): row offset 0 or 1
    ("send: entry -> lock taken", (0, 0), (0, 1)),
    ("send: lock -> fi_inject", (0, 1), (0, 2)),
    ("fi_inject", (0, 2), (0, 3)),
    ("send: fi_inject -> return", (0, 3), (0, 4)),
    ("between the last two CQ reads", (0, 10), (0, 11)),
    ("CQ read start -> completion", (0, 11), (0, 5)),
    ("completion -> handled", (0, 5), (0, 8)),
    ("handled -> pass end", (0, 8), (0, 9)),
    ("pass end -> message taken", (0, 9), (0, 6)),
    ("taken -> receive returns", (0, 6), (0, 7)),
    ("application (return -> next send)", (0, 7), (1, 0)),
    ("completion -> next fi_inject", (0, 5), (1, 2)),
    ("fi_inject return -> completion", (0, 3), (0, 5)),
    ("round trip", (0, 2), (1, 2)),
]


def load(path):
    with open(path) as f:
        ghz = float(f.readline().split()[1])
        rows = [list(map(int, line.split())) for line in f]
    return ghz, rows[20000:140000]


def main():
    for d in sys.argv[1:]:
        files = glob.glob(os.path.join(d, "stamps.*"))
        if not files:
            print("%s: no stamps (the run ended before %s rows)" % (d, "150 000"))
            continue
        ghz, rows = load(files[0])
        print("%s (TSC %.3f GHz, %d rows)" % (os.path.basename(d), ghz, len(rows)))
        for name, (ra, ca), (rb, cb) in STEPS:
            v = [(rows[i + rb][cb] - rows[i + ra][ca]) / ghz
                 for i in range(len(rows) - 1)
                 if rows[i + ra][ca] and rows[i + rb][cb]]
            if v:
                v.sort()
                cut = v[: max(1, len(v) * 99 // 100)]
                print("  %-36s %8.0f ns  (mean below p99 %6.1f)"
                      % (name, st.median(v), st.mean(cut)))


if __name__ == "__main__":
    main()
