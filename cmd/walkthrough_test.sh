#!/usr/bin/env bash
# The README's "Run against a real ZooKeeper" walkthrough, command for command: a local ZooKeeper
# (tools/zk/run.sh), an export declared and published with agentctl (decl, pub), agent v3 with
# --conf and fake_tfs as its TF Serving, then agent_client's HeartBeat and the status endpoint.
# Passes when every sub-graph is AVAILABLE, HeartBeat lists them all, /readyz says ready and the
# agent stops cleanly on SIGTERM. Every wait is bounded, so the test cannot hang.
#
# Usage: walkthrough_test.sh AGENTCTL AGENT AGENT_CLIENT FAKE_TFS ZK_RUN_SH SAVED_MODEL_PB
set -euo pipefail
agentctl=$(realpath "$1") agent=$(realpath "$2") agent_client=$(realpath "$3") fake_tfs=$(realpath "$4")
zk_run=$(realpath "$5") saved_model_pb=$(realpath "$6")
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }; done
  exit 1
}
free_port() { # a loopback port nothing listens on
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  fail "no free port"
}
http_get() { # http_get PORT PATH: the body of an HTTP/1.0 GET on 127.0.0.1
  (
    exec 3<>"/dev/tcp/127.0.0.1/$1"
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$2" "$1" >&3
    timeout 5 sed '1,/^\r$/d' <&3
  )
}
cd "$work"
ZK_PORT=$(free_port)

# 1. A local ZooKeeper.
ZK_PORT=$ZK_PORT ZK_DATA="$work/zk" bash "$zk_run" >"$work/zk.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do grep -q "zk: ready" "$work/zk.log" && break; sleep 0.1; done
grep -q "zk: ready" "$work/zk.log" || fail "ZooKeeper not ready"

# 2. An export: <export_base>/<sub_graph>/<version>/ (the entry's saved_model.pb names the model).
mkdir -p export/entry/1 export/ps_0/1 export/ps_1/1
cp "$saved_model_pb" export/entry/1/saved_model.pb

# 3. Declare the saved models and publish them into the layout /walk/layouts/l.
"$agentctl" --zk_servers=127.0.0.1:$ZK_PORT --bzid=walk --cmd=decl --export_base="$work/export" >decl.log 2>&1 ||
  fail "agentctl decl"
"$agentctl" --zk_servers=127.0.0.1:$ZK_PORT --bzid=walk --cmd=pub --model_name='test_ffm_model:*' --layout=l >pub.log 2>&1 ||
  fail "agentctl pub"

# 4. Agent v3 serving the layout, with fake_tfs as TF Serving.
AGENT_PORT=$(free_port)
STATUS_PORT=$(free_port)
cat >agent.conf <<EOF
bzid walk
deploy_type unified
agent_version 3
zk_servers 127.0.0.1:$ZK_PORT
layout_pattern l
agent_port $AGENT_PORT
EOF
"$agent" --conf=agent.conf --tfs_binary="$fake_tfs" --tfs_log="$work/tfs.log" --status_addr=127.0.0.1:$STATUS_PORT \
  >agent.log 2>&1 &
agent_pid=$!
pids+=($agent_pid)

# 5. HeartBeat lists every sub-graph; the status endpoint shows them AVAILABLE and the agent ready.
hb=""
for _ in $(seq 600); do
  hb=$("$agent_client" --conf=agent.conf --target=127.0.0.1:$AGENT_PORT --cmd_type=hb 2>>client.log || true)
  if grep -q "test_ffm_model:entry" <<<"$hb" && grep -q "test_ffm_model:ps_0" <<<"$hb" && grep -q "test_ffm_model:ps_1" <<<"$hb"; then
    break
  fi
  kill -0 "$agent_pid" 2>/dev/null || fail "the agent exited"
  sleep 0.1
done
echo "$hb" >hb.log
for sg in entry ps_0 ps_1; do grep -q "test_ffm_model:$sg  -> (1)" <<<"$hb" || fail "HeartBeat lacks test_ffm_model:$sg: $hb"; done
status=$(http_get "$STATUS_PORT" /status)
[ "$(grep -c '"state": "AVAILABLE"' <<<"$status")" -eq 3 ] || fail "/status: not 3 models AVAILABLE: $status"
# (Bodies go to variables first: with pipefail, grep -q quitting early would fail the pipe.)
readyz=$(http_get "$STATUS_PORT" /readyz)
grep -q '"ready": true' <<<"$readyz" || fail "/readyz: $readyz"
page=$(http_get "$STATUS_PORT" /)
grep -q "test_ffm_model:ps_1" <<<"$page" || fail "the status page lacks the models: $page"

# 6. SIGTERM stops the agent cleanly.
kill -TERM "$agent_pid"
code=0
timeout 30 tail --pid="$agent_pid" -f /dev/null || fail "the agent still runs 30 s after SIGTERM"
wait "$agent_pid" || code=$?
[ "$code" -eq 0 ] || fail "the agent exited with $code after SIGTERM"
echo PASS
