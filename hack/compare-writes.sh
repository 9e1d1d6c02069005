#!/usr/bin/env bash
# Usage: hack/compare-writes.sh [REF]   (default REF: HEAD)
#
# Runs the envtest integration tests (test/) twice, once with the plugin built
# from REF and once with the working tree, recording every write the plugin
# sends to the apiserver (method, path, body) and every error the tests log
# from it. It then compares both, normalised for what differs between runs
# (resourceVersions, uids, the claims' cluster when it is kube-system's UID
# and their clusterUID, both new in each run's envtest, timestamps, the
# index of a managedFields entry a release removes, which
# the apiserver orders by the second of each manager's last write), and says
# whether a change left the plugin's behaviour byte for byte the same. The
# test namespaces are named for their test (test/fixtures_test.go), the same
# on every run, so nothing of them needs normalising: neither their names
# nor the claims' rule digests, taken over rules that name them. Only the
# tests REF has run (the scenarios both builds know); a test that fails with
# one build is listed, and its writes are compared all the same.
# TestTwoRolloutsShareOneRoute, TestTenRolloutsAtOnce,
# TestStressForeignWritersDuringARollout, TestABusyRoutesMetadataDoesNotStopTheWalk
# and TestTwoProcessesOnOneRoute are left out: their goroutines (the foreign
# writers, the two processes) interleave differently on every run, and so do
# the conflicts they answer. The tests run one at a time (-parallel 1): run
# together, one run's writes of two tests took another guard than the
# other's (a resourceVersion on one side only; why was not found), which one
# at a time has not come back.
# The Leases of the plugin's processes (package peers) are left out too:
# their names are random and their renewals follow the clock.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:-HEAD}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/ref" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
assets=$(bash hack/envtest-assets.sh)
git worktree add --detach "$work/ref" "$ref" >/dev/null
# Each binary keeps the plugin's name: go-plugin names its log lines after it
# (TestThePluginsErrorsReachTheControllersLogAtTheirLevel).
(cd "$work/ref" && CGO_ENABLED=0 go build -o "$work/bin/ref/rollouts-gatewayapi-ssa" .)
CGO_ENABLED=0 go build -o "$work/bin/tree/rollouts-gatewayapi-ssa" .
tests=$(grep -ho '^func Test[A-Za-z0-9_]*' "$work/ref"/test/*_test.go | sed 's/^func //' | grep -vx TestMain | sort -u | paste -sd'|')
# A write's body is compared as JSON with its keys sorted (needs jq): the plugin
# writes a typed configuration's fields in sorted order, client-go in the
# types' order.
canonical() {
  jq -R -c -S 'capture("^(?<m>[^ ]+) (?<p>[^ ]+) (?<b>.*)$") as $l | {m: $l.m, p: $l.p, b: ($l.b | fromjson? // .)}'
}
normalise() {
  sed -E 's/"resourceVersion":"[0-9]+"/"resourceVersion":"N"/g; s/"(time|creationTimestamp|lastTransitionTime)":"[^"]*"/"\1":"T"/g;
          s/"uid":"[^"]*"/"uid":"U"/g; s/resourceVersion [0-9]+/resourceVersion N/g; s#/metadata/managedFields/[0-9]+#/metadata/managedFields/N#g;
          s/\\"(cluster|clusterUID)\\":\\"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\\"/\\"\1\\":\\"UID\\"/g;
          s/(cluster|member) [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/\1 UID/g' |
    grep -v -i -E 'tworolloutsshareoneroute|testtenrolloutsatonce|teststressforeignwriters|testabusyroutesmetadata|testtwoprocessesononeroute|/leases/' | sort
}
for side in ref tree; do
  echo "compare-writes: running test/ with the plugin of $side" >&2
  KUBEBUILDER_ASSETS="$assets" PLUGIN_BIN="$work/bin/$side/rollouts-gatewayapi-ssa" RECORDER_DUMP_WRITES="$work/writes-$side" \
    go test -count=1 -parallel 1 -v -timeout 30m -run "^($tests)\$" ./test/ > "$work/log-$side" 2>&1 ||
    { echo "compare-writes: with the plugin of $side these tests failed:" >&2; grep -E '^\s*--- FAIL' "$work/log-$side" >&2 || tail -30 "$work/log-$side" >&2; }
  canonical < "$work/writes-$side" | normalise > "$work/w-$side"
  grep -o 'error: rollout .*' "$work/log-$side" | normalise > "$work/e-$side" || true
done
status=0
if diff "$work/w-ref" "$work/w-tree" > "$work/w.diff"; then
  echo "writes: identical ($(wc -l < "$work/w-ref") writes)"
else
  echo "writes differ (in what, field by field, after the whole lines):"; sed -n 1,40p "$work/w.diff"
  { diff <(grep '^<' "$work/w.diff" | tr ',' '\n') <(grep '^>' "$work/w.diff" | tr ',' '\n') || true; } | sed -n 1,40p; status=1
fi
if diff "$work/e-ref" "$work/e-tree" > "$work/e.diff"; then
  echo "errors: identical ($(wc -l < "$work/e-ref") errors)"
else
  echo "errors differ:"; sed -n 1,40p "$work/e.diff"; status=1
fi
exit $status
