// Package chaos is the fault-injection harness behind `make chaos`.
//
// It runs the real system as separate operating-system processes (a
// `worker dev-broker` Kafka, a redis-server with its append-only file on,
// a `worker payment-stub` and several `worker run` processes executing the
// demo.transfer job against PostgreSQL) and, while jobs flow, injects the
// faults that at-least-once delivery has to survive: SIGKILL and restart of
// a worker, SIGSTOP of a worker for longer than its lease TTL followed by
// SIGCONT (a zombie), a restart of Redis, workers joining and leaving to
// force consumer-group rebalances, and network partitions: each worker
// reaches Redis and the broker through its own [Link], a proxy that can
// blackhole one direction or both (bytes held, nothing refused) while the
// worker keeps running. An operator's controls join them: a few jobs,
// drawn from the seed, are cancelled while they run and the job type is
// paused and resumed (Config.Cancels, Config.TypePauses), through the
// Inspector calls of `worker cancel`, `worker pause` and `worker resume`.
//
// The Redis links also parse the workers' traffic into a [History] of the
// claims, commits and releases of every job's record, with call and return
// times; the workers' logged fenced writes join it, and [CheckHistory]
// checks it against [RecordModel] with Porcupine. With Config.Soak the run
// is a soak: the same faults at a steady pace for a chosen time, the
// workers' and Redis's resources sampled and checked flat ([Flatness]).
//
// The Kafka is the dev-broker by default. With Config.Kafka set to
// [KafkaApache] (CHAOS_KAFKA=apache) it is a single-node Apache Kafka broker
// (internal/kafkabroker), and the schedule adds the faults only a real broker
// gives: the broker SIGKILLed and restarted on its data directory, and the
// broker SIGSTOPped for longer than the workers' session timeout, then
// continued. The run counts the ones carried out (broker_kills,
// broker_pauses). With [KafkaApacheCluster] (CHAOS_KAFKA=apache-cluster) it
// is three nodes with the topics at replication 3 and min.insync.replicas
// 2; the kills go in turn to the leader of a jobs partition, the group's
// coordinator and the active controller, the pauses to a partition leader.
//
// The fault schedule is generated from a seed ([NewSchedule]); the seed is
// printed first, so that a failing run can be replayed with the same seed.
//
// When the jobs have drained, [Check] verifies the outcome from the outside:
// it reads only PostgreSQL and the payment stub's own record of charges and
// refunds, never the workers' own account, and reports one figure a line
// (`name=value unit`, see [Figures]). A run fails when a figure that must be
// zero (jobs_lost, fenced_effects_duplicated, unfenced_net_not_one,
// cancelled_not_compensated, and those of the history, the partitions and
// a soak) is not. A cancelled key's transfer must be absent or applied
// once, and its charges refunded.
//
// Every child process is started by a [Proc], which gives it its own log
// file and lets the harness stop, kill, pause, resume and restart it.
package chaos
