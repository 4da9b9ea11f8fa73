#!/usr/bin/env bash
# The runbook demo behind `make demo`: every step is a real ocigroup command against the bundled emulator.
# It starts the emulator, creates a stream, publishes, runs two group instances that split the partitions,
# inspects the group, kills one instance and shows the rebalance, plans and executes a reset, exports a range
# with Spark and verifies it. It works in a throw-away state directory and leaves nothing running.
set -euo pipefail

work="$(mktemp -d "${TMPDIR:-/tmp}/ocigroup-demo.XXXXXX")"
export OCIGROUP_STATE_DIR="$work/state"
export OCIGROUP_LOCAL_PORT="${OCIGROUP_DEMO_PORT:-18419}"   # not the everyday local port: a running one is left alone
export OCIGROUP_PROFILE=local OCIGROUP_STREAM_NAME=orders OCIGROUP_GROUP_NAME=billing
export OCIGROUP_GROUP_TIMEOUT_MS=6000                       # a dead instance loses its partitions after 6 s
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ocigroup -q export engine stop >/dev/null 2>&1 || true    # the warm Spark engine step 6 started
  ocigroup -q emulator stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "1. Start the bundled emulator and create a stream with 4 partitions"
run ocigroup emulator start
run ocigroup streams create orders --partitions 4

step "2. Two instances of group 'billing' join and split the partitions"
for name in worker-a worker-b; do
  printf '$ ocigroup tail billing --instance %s --join-live > %s.out &\n' "$name" "$name"
  ocigroup tail billing --instance "$name" --join-live >"$work/$name.out" 2>"$work/$name.err" &
  pids+=("$!")
  sleep 1
done

step "3. Publish 2,000 orders; each instance consumes its own partitions"
printf '$ seq 2000 | awk ... | ocigroup publish --json-lines   # {"key": "customer-N", "value": "order-M"}\n'
seq 2000 | awk '{printf "{\"key\": \"customer-%d\", \"value\": \"order-%d\"}\n", $1 % 50, $1}' \
  | ocigroup -q publish --json-lines >/dev/null
echo "published 2,000 messages"

sleep 4
run ocigroup -o table inspect billing
printf 'worker-a wrote %s messages, worker-b %s\n' "$(wc -l <"$work/worker-a.out")" "$(wc -l <"$work/worker-b.out")"

step "4. worker-b dies (kill -9); after the 6 s timeout worker-a takes its partitions"
disown "${pids[1]}"   # bash would report the kill below as a "Killed" line of its own
run kill -9 "${pids[1]}"
sleep 8
seq 2001 2200 | awk '{printf "{\"key\": \"customer-%d\", \"value\": \"order-%d\"}\n", $1 % 50, $1}' \
  | ocigroup -q publish --json-lines >/dev/null
sleep 2
run ocigroup -o table inspect billing
grep -h "partitions held" "$work/worker-a.err" | tail -n 1 || true
printf 'worker-a has now written %s messages\n' "$(wc -l <"$work/worker-a.out")"
run kill -TERM "${pids[0]}"   # tail stops cleanly: exit 130, nothing half-written committed
wait "${pids[0]}" 2>/dev/null || true

step "5. Replay: plan a reset to the earliest offset, then execute it (once worker-a's reservations lapse)"
sleep 7
run ocigroup -o table reset billing --to earliest
run ocigroup -o table reset billing --to earliest --execute --yes

step "6. Audit export of partitions 0-3 with Spark to the local bucket (Object Storage), then verify it"
run ocigroup -o table export --partition 0-3 --from-offset 0 --out oci://audit/demo/orders
run ocigroup -o table export verify oci://audit/demo/orders

step "7. Stop the Spark engine the export started, and the emulator"
run ocigroup export engine stop
run ocigroup emulator stop
printf '\nDone: nothing is left running, and %s is removed.\n' "$work"
