#!/usr/bin/env bash
# Every benchmark of `task bench`, one after the other (figures printed; ratios measured side
# by side within each). One that misses its goal or fails does not stop the others: the
# script names them at the end and exits 1. About 8.5 min in all on the 2-core machine of
# 2026-11-30. Runs the `peloton` first on PATH (the Taskfile puts .venv/bin first).
set -uo pipefail

failed=()
bench() {
  echo "== peloton bench $*"
  peloton bench "$@" || failed+=("peloton bench $* (exit $?)")
}

bench pipeline --tasks 10000
# full sizes of these two: burst --jobs 5000, restart --tasks 1000000
bench burst --jobs 1000 --hosts 50 --timeout 300
bench intake
bench joined
bench devbroker
# issue 10's full size: 10,000 hosts, 100,000 tasks, both configurations (about 5.5 min);
# add --plot docs/bench-scale.png to draw the README's plot again
bench scale
bench restart --tasks 100000
bench workloads --hosts 500 --instances 2000
bench agents
bench entitlement
bench backlog --ticks 3
bench backlog --hosts 1000 --task-cpu 0.1 --unconfirmed
bench placement --hosts 10000 --tasks 100000

if ((${#failed[@]})); then
  echo "== ${#failed[@]} benchmark(s) missed a goal or failed:"
  printf '   %s\n' "${failed[@]}"
  exit 1
fi
echo "== every benchmark ran and met its goals"
