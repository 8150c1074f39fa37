// Package deploy holds no Go code: it is where the deployment files live and
// where their test checks them. docker-compose.yml runs Apache Kafka (KRaft),
// Redis (redis.conf: AOF everysec, noeviction), Jaeger, Prometheus
// (prometheus.yml), Grafana (grafana/), two workers and a producer; k8s/ holds
// the Kubernetes manifests; grafana/leasehold.json is the dashboard, whose
// queries name only metrics that package tracing lists as exported.
package deploy
