#!/usr/bin/env bash
# Runs a local single-node ZooKeeper in the foreground for manual use (Ctrl-C stops it), from
# Debian's zookeeper package (installed by tools/bazel/setup.sh). Tests use pkg/zk/zktest instead.
#   ZK_PORT      client port (default 2181)
#   ZK_ADDRESS   listen address (default 127.0.0.1)
#   ZK_DATA      data directory, kept afterwards (default: a temporary directory, removed on exit)
#   ZK_TICK_MS   tickTime in ms (default 2000; sessions may last 2 to 20 ticks)
#   ZK_JAR       server jar (default /usr/share/java/zookeeper.jar)
# Example: ZK_PORT=2182 ZK_DATA=/tmp/zk bash tools/zk/run.sh
set -euo pipefail
port="${ZK_PORT:-2181}"
address="${ZK_ADDRESS:-127.0.0.1}"
tick="${ZK_TICK_MS:-2000}"
jar="${ZK_JAR:-/usr/share/java/zookeeper.jar}"

java="$(command -v java || true)"
if [ -z "$java" ] || [ ! -f "$jar" ]; then
  echo "zk: need java and $jar (Debian's zookeeper package): run tools/bazel/setup.sh" >&2
  exit 1
fi

if [ -n "${ZK_DATA:-}" ]; then
  data="$ZK_DATA"
  mkdir -p "$data"
else
  data="$(mktemp -d -t zk.XXXXXX)"
  trap 'rm -rf "$data"' EXIT
fi
data="$(cd "$data" && pwd)"

# Configuration and log4j settings live in $data/conf (on the classpath); the server logs to the
# console. SLF4J needs a binding next to the jar: Debian's slf4j-log4j12 and log4j 1.2.
mkdir -p "$data/conf"
cat > "$data/conf/zoo.cfg" <<EOF
tickTime=$tick
dataDir=$data
clientPort=$port
clientPortAddress=$address
admin.enableServer=false
4lw.commands.whitelist=*
EOF
cat > "$data/conf/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
EOF
classpath="$data/conf:$jar"
for j in slf4j-log4j12.jar log4j-1.2.jar; do
  if [ -f "$(dirname "$jar")/$j" ]; then classpath="$classpath:$(dirname "$jar")/$j"; fi
done

echo "zk: starting ZooKeeper on $address:$port, data in $data (Ctrl-C stops it)" >&2
"$java" -Xmx256m -cp "$classpath" org.apache.zookeeper.server.quorum.QuorumPeerMain "$data/conf/zoo.cfg" &
pid=$!
stopped=
trap 'stopped=1; kill "$pid" 2>/dev/null || true' INT TERM

# Say when it accepts sessions: srvr answers with its version only then (ruok says imok earlier).
(
  for _ in $(seq 1 300); do
    if ! kill -0 "$pid" 2>/dev/null; then exit 0; fi
    if resp=$( (exec 3<>"/dev/tcp/$address/$port" && printf srvr >&3 && timeout 1 cat <&3) 2>/dev/null) &&
      [[ "$resp" == "Zookeeper version"* ]]; then
      echo "zk: ready on $address:$port" >&2
      exit 0
    fi
    sleep 0.1
  done
  echo "zk: not ready after 30 s" >&2
) &

status=0
wait "$pid" || status=$?
# After a signal, wait returns early: wait again for java to exit.
while kill -0 "$pid" 2>/dev/null; do wait "$pid" || status=$?; done
if [ -n "$stopped" ]; then
  echo "zk: stopped" >&2
  exit 0
fi
exit "$status"
