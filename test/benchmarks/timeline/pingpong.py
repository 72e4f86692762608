#!/usr/bin/env python3
"""pingpong.py CLIFILE SRVFILE SIZE - one-way phases of a tcp ping-pong
from the two files of the timeline shim (shim.c: "t_enter t_leave tid
call fd ret" per call, CLOCK_MONOTONIC ns).  A message is a send system
call of at least SIZE bytes; its trip ends when the receiver starts its
own such send.  The receiver's reads of it are the socket reads that
return data between the two.  Called by pingpong.sh."""
import bisect
import statistics
import sys

SENDS = ("sendmsg", "sendto", "send")
READS = ("recv", "recvfrom", "recvmsg", "readv", "read")


def load(path):
    ev = []
    with open(path) as f:
        for line in f:
            t0, t1, _tid, call, fd, ret = line.split()
            ev.append((int(t0), int(t1), call, int(fd), int(ret)))
    ev.sort()
    return ev


def socket_fds(ev, big):
    """The fds the big sends go to: reads on them are the message's."""
    return {e[3] for e in ev if e[2] in SENDS and e[4] >= big}


phases = {}


def add(key, ns):
    phases.setdefault(key, []).append(ns / 1000.0)


def one_way(snd, rcv, big):
    """Every big send of snd, against rcv's reads until rcv's next one."""
    rfds = socket_fds(rcv, big)
    sends = [e for e in snd if e[2] in SENDS and e[4] >= big]
    rsends = [e for e in rcv if e[2] in SENDS and e[4] >= big]
    reads = [e for e in rcv if e[2] in READS and e[3] in rfds and e[4] > 0]
    rs0 = [e[0] for e in rsends]
    rr0 = [e[0] for e in reads]
    for s in sends:
        i = bisect.bisect_left(rs0, s[1])
        if i >= len(rsends):
            break
        nxt = rsends[i]
        j = bisect.bisect_left(rr0, s[0])
        got = []
        while j < len(reads) and reads[j][0] < nxt[0]:
            got.append(reads[j])
            j += 1
        if sum(r[4] for r in got) < big:
            continue
        add("1 send system call", s[1] - s[0])
        add("2 its end -> the receiver's first read", got[0][0] - s[1])
        add("3 the receiver's reads of it", got[-1][1] - got[0][0])
        add("4 last read -> the receiver's send call", nxt[0] - got[-1][1])
        add("= one way", nxt[0] - s[0])


def ripc_parts(ev, big):
    """Phase 4 of a libripc process, split at its API calls."""
    pts = []
    for t0, t1, call, fd, ret in ev:
        pts.append((t0, 0, call, ret))
        pts.append((t1, 1, call, ret))
    pts.sort()
    last_read = rcv_end = send_start = write_start = None
    for t, end, call, ret in pts:
        if end and call in READS and ret > 0 and call != "read":
            last_read = t
        elif not end and call == "write" and last_read:
            write_start = t
        elif end and call == "write" and write_start:
            add("4a  of which: a 1-byte write (libfabric's CQ signal)", t - write_start)
            write_start = None
        elif end and call == "ripc_receive_timeout":
            if last_read:
                add("4b  last read -> ripc_receive returns", t - last_read)
            rcv_end, last_read = t, None
        elif not end and call == "ripc_send_short":
            send_start = t
            if rcv_end:
                add("4c  -> ripc_send_short called (the application)", t - rcv_end)
            rcv_end = None
        elif not end and call in SENDS and ret >= big and send_start:
            add("4d  -> its send system call (gather copy included)", t - send_start)
            send_start = None


def main():
    cli, srv, big = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
    one_way(cli, srv, big)
    one_way(srv, cli, big)
    if any(e[2] == "ripc_send_short" for e in cli):
        ripc_parts(cli, big)
        ripc_parts(srv, big)
    for key in sorted(phases):
        v = sorted(phases[key])
        n = len(v)
        print(f"  {key:55s} {v[n // 2]:7.2f} us  (p25 {v[n // 4]:.2f}, "
              f"p75 {v[3 * n // 4]:.2f}; mean {statistics.mean(v):.2f}; n={n})")


main()
