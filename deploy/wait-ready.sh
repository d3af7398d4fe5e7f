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
pki=${WEIR_PKI:-deploy/pki}
cat <<MSG

  $leader (leader)   REST + /metrics  https://$(port "$leader" 8081)   gRPC $(port "$leader" 6123) (mutual TLS)
  $standby (standby)  REST + /metrics  https://$(port "$standby" 8081)   gRPC $(port "$standby" 6123) (mutual TLS)
  Prometheus               http://$(port prometheus 9090)   (targets: /targets, API: /api/v1/targets)
  etcd-1..3, taskmanager-1..3: inside the compose network only
  Grafana: import deploy/grafana-dashboard.json, pick the Prometheus data source

  Security is on: certificates and tokens are in $pki (made once by make pki).
  The REST API and the dashboard want a token: $pki/admin.token (admin) or
  $pki/read.token (read only); the dashboard asks for it. /metrics and
  /healthz are open. Trust $pki/ca.pem, or let curl do it:
    curl -s --cacert $pki/ca.pem -H "Authorization: Bearer \$(cat $pki/admin.token)" https://$(port "$leader" 8081)/jobs/overview
  The CLI inside the containers has a certificate and the admin token; from
  the host give it the client certificate and a token:
    WEIR_TLS_CERT=$pki/client.pem WEIR_TLS_KEY=$pki/client-key.pem WEIR_TLS_CA=$pki/ca.pem \\
    WEIR_TOKEN_FILE=$pki/admin.token bin/weir --jobmanager $(port "$leader" 6123) job list

  Submit the example job (sink: the output volume, /output/running-sum):
    $COMPOSE exec -T jobmanager-1 weir job submit -f - < deploy/running-sum.yaml
  Then:
    $COMPOSE exec -T jobmanager-1 weir job list
  Stop and remove everything (volumes included): make down
MSG
