#!/usr/bin/env bash
# sparse_ab.sh - sparse request/reply over tcp after idleness: libripc with
# rxm's passthrough, libripc without it, raw libfabric (tcp through the
# passthrough, sleeping on its CQ's wait fd whenever it waits:
# raw/fi_rma_bench -Z) and kernel TCP (raw/tcp_bench -Z), one after the
# other in every round, pinned (server CPU 0, client CPU 1), then the
# medians of the rounds, their ranges, the paired difference on - off and
# each one's ratio to raw libfabric and to kernel TCP in the same round.
# Side experiment of perf_notes.md (sparse tcp, "Followed on 11-29").
#
#   test/benchmarks/sparse_ab/sparse_ab.sh [-b build] [-r rounds] [-x think_ms] [-t seconds]
#
# -b: a configured and built tree (build-bench by default; `make -C B
# check TESTS=` is not needed, the benchmarks are built by `make`).
# Prints one line per run, then the summary.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
B=$src/build-bench rounds=12 think=10 secs=3
while getopts "b:r:x:t:" o; do
	case $o in
	b) B=$(cd "$OPTARG" && pwd) ;;
	r) rounds=$OPTARG ;;
	x) think=$OPTARG ;;
	t) secs=$OPTARG ;;
	*) sed -n '2,12p' "$0"; exit 2 ;;
	esac
done
BIN=$B/test/benchmarks/.libs RAW=$B/test/benchmarks/raw
for f in "$BIN/ripc_sparse" "$RAW/tcp_bench" "$RAW/fi_rma_bench"; do
	[ -x "$f" ] || { echo "sparse_ab.sh: $f not built" >&2; exit 1; }
done
tmp=$(mktemp -d /tmp/sparse_ab.XXXXXX)
srv=
cleanup() {
	[ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export LD_LIBRARY_PATH=$B/.libs RIPC_RESOLVER=0 FI_TCP_IFACE=lo \
	RIPC_TCP_ADDR=127.0.0.1 RIPC_REGISTRY=$tmp/reg

stop_srv() { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; srv=; }

for r in $(seq 1 "$rounds"); do
	for m in on off raw tcp; do
		if [ "$m" = raw ]; then
			port=$((20000 + RANDOM % 20000))
			FI_OFI_RXM_ENABLE_PASSTHRU=1 taskset -c 0 \
				"$RAW/fi_rma_bench" -p tcp -s -P "$port" -Z 1 -T 60 &
			srv=$!
			sleep 0.3
			FI_OFI_RXM_ENABLE_PASSTHRU=1 taskset -c 1 \
				"$RAW/fi_rma_bench" -p tcp -P "$port" -Z "$think" -L 64 \
				-n 1000 -t "$secs" -T 60 | grep ' lat_us ' |
				sed "s/^fi_rdm_think[0-9]*ms/r$r raw_libfabric/" |
				tee -a "$tmp/lines"
		elif [ "$m" = tcp ]; then
			port=$((20000 + RANDOM % 20000))
			taskset -c 0 "$RAW/tcp_bench" -s -P "$port" -T 60 &
			srv=$!
			sleep 0.3
			taskset -c 1 "$RAW/tcp_bench" -P "$port" -L 64 -Z "$think" \
				-n 1000 -t "$secs" -q | grep ' lat_us ' |
				sed "s/^tcp_socket_think[0-9]*ms/r$r tcp_socket/" |
				tee -a "$tmp/lines"
		else
			v=1
			[ "$m" = off ] && v=0
			rm -f "$tmp/ready"
			FI_OFI_RXM_ENABLE_PASSTHRU=$v taskset -c 0 \
				"$BIN/ripc_sparse" -s -p tcp -r "$tmp/ready" -T 60 \
				>/dev/null &
			srv=$!
			for _ in $(seq 100); do
				[ -s "$tmp/ready" ] && break
				sleep 0.05
			done
			FI_OFI_RXM_ENABLE_PASSTHRU=$v taskset -c 1 \
				"$BIN/ripc_sparse" -N "passthru_$m" -p tcp -x "$think" \
				-S 64 -n 1000 -t "$secs" "$(cat "$tmp/ready")" |
				grep ' lat_us ' |
				sed "s/^passthru_${m}_think[0-9]*ms/r$r libripc_passthru_$m/" |
				tee -a "$tmp/lines"
		fi
		stop_srv
	done
done

python3 - "$tmp/lines" "$think" <<'PY'
import re, statistics, sys
d = {}
for l in open(sys.argv[1]):
    m = re.match(r'r(\d+) (\S+) tcp 64 lat_us ([\d.]+)', l)
    if m:
        d.setdefault(m.group(2), {})[int(m.group(1))] = float(m.group(3))
print(f"# one-way us at {sys.argv[2]} ms think: median of the rounds (range)")
for k, v in sorted(d.items()):
    x = list(v.values())
    print(f"{k:26s} {statistics.median(x):8.1f}  ({min(x):.1f}-{max(x):.1f}, {len(x)} rounds)")
on, off, raw, t = (d.get(k, {}) for k in
                   ("libripc_passthru_on", "libripc_passthru_off",
                    "raw_libfabric", "tcp_socket"))
both = [r for r in on if r in off]
if both:
    diff = [on[r] - off[r] for r in both]
    print(f"paired on - off: median {statistics.median(diff):.1f} us, "
          f"on slower in {sum(x > 0 for x in diff)} of {len(diff)}")
for k, v in (("libripc, passthrough on", on), ("libripc, passthrough off", off),
             ("raw libfabric", raw)):
    for base, bname in ((raw, "raw libfabric"), (t, "kernel TCP")):
        rs = [v[r] / base[r] for r in v if r in base]
        if rs and v is not base:
            print(f"{k} / {bname}, same round: median {statistics.median(rs):.2f}x")
PY
