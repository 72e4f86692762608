#!/usr/bin/env bash
# run_dir_bench.sh - the service directory's figures (docs/DIRECTORY.md).
#
# Usage (root, from the build directory):
#   ../test/benchmarks/run_dir_bench.sh [rounds]
# Starts a 3-server ZooKeeper ensemble and three network namespaces as
# hosts (test/scripts/directory.sh -m), registers 10,000 IDs from 100
# processes, measures lookups (miss, hit, burst) and restarts and moves
# under traffic, and prints benchmark lines ("system transport size_bytes
# metric value unit").  Exit 77 when ZooKeeper or namespaces are missing.
here=$(cd "$(dirname "$0")" && pwd)
build=$(pwd)
export RIPC_BENCH_RESTARTS=${1:-10}
export RIPC_BENCH_DIR_BENCH=$build/test/benchmarks/dir_bench
exec "$here/../scripts/directory.sh" -b "$build/test/functional" -m
