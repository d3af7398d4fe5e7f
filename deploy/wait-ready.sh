#!/usr/bin/env bash
# wait-ready.sh — run by `make up` after `docker-compose up -d`: waits until
# a JobManager leads the cluster and three TaskManagers are registered with
# it, then prints what runs and how to reach it. $COMPOSE is the compose
# command with its project and file options.
set -euo pipefail
COMPOSE=${COMPOSE:-docker-compose -p weir -f deploy/docker-compose.yml}
want=${WEIR_TASKMANAGERS:-3}
deadline=$((SECONDS + ${WEIR_UP_TIMEOUT:-180}))

leader=""
tms=0
while :; do
  # The CLI inside a Weir container finds the leader through etcd.
  json=$($COMPOSE exec -T jobmanager-1 weir --timeout=3s taskmanager list -o json 2>/dev/null || true)
  tms=$(grep -o '"id"' <<<"$json" | wc -l || true)
  leader=$($COMPOSE exec -T etcd-1 etcdctl --command-timeout=3s get --prefix --sort-by=CREATE --order=ASCEND --limit=1 --print-value-only /weir/default/leader/ 2>/dev/null |
    grep -o '"rpc_addr" *: *"[^"]*"' | head -n1 | sed 's/.*"\([^":]*\):[0-9]*"$/\1/' || true)
  if [ -n "$leader" ] && [ "$tms" -ge "$want" ]; then
    break
  fi
  if [ $SECONDS -ge $deadline ]; then
    echo "wait-ready: no leader with $want TaskManagers in time (leader: '${leader:-none}', TaskManagers: $tms)" >&2
    $COMPOSE ps >&2 || true
    $COMPOSE logs --tail=20 >&2 || true
    exit 1
  fi
  sleep 1
done

# Then every container's own healthcheck (the output below shows them).
while [ $SECONDS -lt $deadline ]; do
  states=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' $($COMPOSE ps -q) 2>/dev/null || true)
  grep -q starting <<<"$states" || break
  sleep 1
done

port() { $COMPOSE port "$1" "$2" 2>/dev/null | tr -d '\r' | sed 's/^0\.0\.0\.0:/127.0.0.1:/'; }
standby=jobmanager-1
[ "$leader" = jobmanager-1 ] && standby=jobmanager-2

echo
$COMPOSE ps
echo
echo "Weir cluster is up: $leader leads, $standby stands by, $tms TaskManagers registered."
$COMPOSE exec -T jobmanager-1 weir taskmanager list
cat <<MSG

  $leader (leader)   REST + /metrics  http://$(port "$leader" 8081)   gRPC $(port "$leader" 6123)
  $standby (standby)  REST + /metrics  http://$(port "$standby" 8081)   gRPC $(port "$standby" 6123)
  Prometheus               http://$(port prometheus 9090)   (targets: /targets, API: /api/v1/targets)
  etcd-1..3, taskmanager-1..3: inside the compose network only
  Grafana: import deploy/grafana-dashboard.json, pick the Prometheus data source

  Submit the example job (sink: the output volume, /output/running-sum):
    $COMPOSE exec -T jobmanager-1 weir job submit -f - < deploy/running-sum.yaml
  Then:
    $COMPOSE exec -T jobmanager-1 weir job list
    curl -s http://$(port "$leader" 8081)/jobs/<job-id>/checkpoints
  Stop and remove everything (volumes included): make down
MSG
