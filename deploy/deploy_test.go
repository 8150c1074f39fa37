package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/leasehold/leasehold/internal/freeport"
	"github.com/leasehold/leasehold/tracing"
	"github.com/leasehold/leasehold/workercmd"
)

// doc is a decoded YAML or JSON document.
type doc = map[string]any

func readYAML(t *testing.T, path string) []doc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []doc
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d doc
		err := dec.Decode(&d)
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no YAML document", path)
	}
	return out
}

// get walks a path of map keys and list indexes ("spec.template.0.name").
func get(v any, path string) any {
	for _, p := range strings.Split(path, ".") {
		switch n := v.(type) {
		case map[string]any:
			v = n[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(n) {
				return nil
			}
			v = n[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any, path string) string {
	switch x := get(v, path).(type) {
	case string:
		return x
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}

func list(v any, path string) []any {
	l, _ := get(v, path).([]any)
	return l
}

// env returns a compose service's environment as a map (either form).
func env(svc any) map[string]string {
	out := map[string]string{}
	switch e := get(svc, "environment").(type) {
	case map[string]any:
		for k, v := range e {
			out[k] = fmt.Sprint(v)
		}
	case []any:
		for _, kv := range e {
			k, v, _ := strings.Cut(fmt.Sprint(kv), "=")
			out[k] = v
		}
	}
	return out
}

func TestCompose(t *testing.T) {
	c := readYAML(t, "docker-compose.yml")[0]
	services, _ := c["services"].(map[string]any)
	for _, name := range []string{"kafka", "kafka-init", "redis", "jaeger", "prometheus", "worker-1", "worker-2", "producer"} {
		if services[name] == nil {
			t.Errorf("service %q missing", name)
		}
	}
	for name, svc := range services {
		if str(svc, "image") == "" && get(svc, "build") == nil {
			t.Errorf("service %s has neither image nor build", name)
		}
		deps := get(svc, "depends_on")
		var names []string
		switch d := deps.(type) {
		case map[string]any:
			for n := range d {
				names = append(names, n)
			}
		case []any:
			for _, n := range d {
				names = append(names, fmt.Sprint(n))
			}
		}
		for _, n := range names {
			if services[n] == nil {
				t.Errorf("service %s depends on unknown service %s", name, n)
			}
		}
		for _, v := range list(svc, "volumes") {
			src, _, _ := strings.Cut(fmt.Sprint(v), ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
	}

	// Kafka in KRaft mode: broker and controller roles, a quorum, no ZooKeeper.
	kafka := services["kafka"]
	ke := env(kafka)
	if !strings.HasPrefix(str(kafka, "image"), "apache/kafka:") {
		t.Errorf("kafka image %q, want Apache Kafka", str(kafka, "image"))
	}
	if ke["KAFKA_PROCESS_ROLES"] != "broker,controller" || ke["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "" || ke["KAFKA_CONTROLLER_LISTENER_NAMES"] == "" {
		t.Errorf("kafka is not configured for KRaft: %v", ke)
	}
	for k := range ke {
		if strings.Contains(k, "ZOOKEEPER") {
			t.Errorf("kafka has ZooKeeper setting %s", k)
		}
	}

	// Redis runs with deploy/redis.conf.
	redisSvc := services["redis"]
	if !slices.ContainsFunc(list(redisSvc, "command"), func(a any) bool { return strings.HasSuffix(fmt.Sprint(a), "redis.conf") }) {
		t.Errorf("redis command %v does not load redis.conf", list(redisSvc, "command"))
	}
	if !slices.ContainsFunc(list(redisSvc, "volumes"), func(a any) bool { return strings.HasPrefix(fmt.Sprint(a), "./redis.conf:") }) {
		t.Errorf("redis does not mount ./redis.conf")
	}

	// Workers: Kafka, Redis, OTLP to Jaeger, HTTP for probes and metrics.
	jaegerPorts := fmt.Sprint(list(services["jaeger"], "ports"))
	for _, name := range []string{"worker-1", "worker-2"} {
		w := services[name]
		we := env(w)
		if we["LEASEHOLD_BROKERS"] != "kafka:9092" {
			t.Errorf("%s LEASEHOLD_BROKERS = %q", name, we["LEASEHOLD_BROKERS"])
		}
		if !strings.HasPrefix(we["REDIS_URL"], "redis://redis:6379") {
			t.Errorf("%s REDIS_URL = %q", name, we["REDIS_URL"])
		}
		if we["OTEL_EXPORTER_OTLP_ENDPOINT"] != "http://jaeger:4318" || !strings.Contains(jaegerPorts, "4318") {
			t.Errorf("%s OTLP endpoint %q; jaeger ports %s", name, we["OTEL_EXPORTER_OTLP_ENDPOINT"], jaegerPorts)
		}
		if we["LEASEHOLD_HTTP"] != ":8080" {
			t.Errorf("%s LEASEHOLD_HTTP = %q", name, we["LEASEHOLD_HTTP"])
		}
		if got := list(w, "command"); len(got) == 0 || got[0] != "run" {
			t.Errorf("%s command %v, want run", name, got)
		}
		checkWorkerEnv(t, name, we)
	}
	// The producer enqueues jobs of a type the deployed program registers,
	// with settings its enqueue reads (LEASEHOLD_TOPICS, not the deprecated
	// LEASEHOLD_TOPIC).
	producer := services["producer"]
	cmd := list(producer, "command")
	if len(cmd) == 0 || cmd[0] != "enqueue" {
		t.Errorf("producer command %v, want enqueue", cmd)
	}
	checkEnv(t, "producer", "enqueue", env(producer))
	if _, old := env(producer)["LEASEHOLD_TOPIC"]; old {
		t.Errorf("producer sets LEASEHOLD_TOPIC, deprecated: set LEASEHOLD_TOPICS")
	}
	if env(producer)["LEASEHOLD_TOPICS"] != env(services["worker-1"])["LEASEHOLD_TOPICS"] {
		t.Errorf("producer LEASEHOLD_TOPICS %q, workers consume %q", env(producer)["LEASEHOLD_TOPICS"], env(services["worker-1"])["LEASEHOLD_TOPICS"])
	}
	if str(producer, "image") != str(services["worker-1"], "image") {
		t.Errorf("producer image %q, want the workers' %q", str(producer, "image"), str(services["worker-1"], "image"))
	}
	typ := ""
	for i, a := range cmd {
		if fmt.Sprint(a) == "--type" && i+1 < len(cmd) {
			typ = fmt.Sprint(cmd[i+1])
		}
	}

	// Prometheus scrapes exactly the two workers on their HTTP port.
	prom := readYAML(t, "prometheus.yml")[0]
	var targets []string
	for _, sc := range list(prom, "scrape_configs") {
		if str(sc, "metrics_path") != "/metrics" {
			t.Errorf("scrape config %s: metrics_path %q", str(sc, "job_name"), str(sc, "metrics_path"))
		}
		for _, s := range list(sc, "static_configs") {
			for _, tg := range list(s, "targets") {
				targets = append(targets, fmt.Sprint(tg))
			}
		}
	}
	slices.Sort(targets)
	if want := []string{"worker-1:8080", "worker-2:8080"}; !slices.Equal(targets, want) {
		t.Errorf("prometheus targets %v, want %v", targets, want)
	}

	// The build context holds the Dockerfile and the program's main
	// package (build argument PKG, the Dockerfile's default too), which
	// registers the producer's job type.
	w1 := services["worker-1"]
	if get(w1, "build") == nil {
		t.Fatal("worker-1 has no build section")
	}
	ctx := filepath.Join(".", str(w1, "build.context"))
	pkg := str(w1, "build.args.PKG")
	if pkg == "" || pkg != dockerfileArg(t, filepath.Join(ctx, str(w1, "build.dockerfile")), "PKG") {
		t.Errorf("build argument PKG %q, want the Dockerfile's default %q", pkg, dockerfileArg(t, filepath.Join(ctx, str(w1, "build.dockerfile")), "PKG"))
	}
	for _, f := range []string{str(w1, "build.dockerfile"), filepath.Join(pkg, "main.go"), "go.mod"} {
		if _, err := os.Stat(filepath.Join(ctx, f)); err != nil {
			t.Errorf("build context: %v", err)
		}
	}
	main, _ := os.ReadFile(filepath.Join(ctx, pkg, "main.go"))
	if !bytes.Contains(main, []byte("workercmd.Main(")) {
		t.Errorf("%s is not a program built with workercmd.Main", pkg)
	}
	if typ == "" || !bytes.Contains(main, []byte(`w.Register("`+typ+`"`)) {
		t.Errorf("the producer enqueues --type %q, which %s does not register", typ, pkg)
	}
}

// dockerfileArg returns the default of the build argument name in a
// Dockerfile ("ARG name=default").
func dockerfileArg(t *testing.T, path, name string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ARG\s+` + name + `=(\S+)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no ARG %s=default", path, name)
	}
	return string(m[1])
}

// commandFlags is the `-h` text of a command of the deployed program
// (examples/myworker: the worker's command line without flags of its own),
// which names every environment variable it reads as "(env NAME)".
func commandFlags(t *testing.T, command string) string {
	t.Helper()
	var out, errb bytes.Buffer
	workercmd.Run(context.Background(), []string{command, "-h"}, &workercmd.Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	text := out.String() + errb.String()
	if !strings.Contains(text, "(env ") {
		t.Fatalf("%s -h names no environment variables:\n%s", command, text)
	}
	return text
}

// checkWorkerEnv fails for a LEASEHOLD_* variable `run` does not read: a
// typo there is a setting silently ignored.
func checkWorkerEnv(t *testing.T, where string, vars map[string]string) {
	t.Helper()
	checkEnv(t, where, "run", vars)
}

// checkEnv fails for a LEASEHOLD_* variable command does not read.
func checkEnv(t *testing.T, where, command string, vars map[string]string) {
	t.Helper()
	help := commandFlags(t, command)
	for k := range vars {
		if (strings.HasPrefix(k, "LEASEHOLD_") || k == "REDIS_URL") && !strings.Contains(help, "(env "+k+")") {
			t.Errorf("%s sets %s, which `%s` does not read", where, k, command)
		}
	}
}

func TestRedisConf(t *testing.T) {
	want := map[string]string{"appendonly": "yes", "appendfsync": "everysec", "maxmemory-policy": "noeviction"}
	b, err := os.ReadFile("redis.conf")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && !strings.HasPrefix(f[0], "#") {
			got[f[0]] = f[1]
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("redis.conf %s = %q, want %q", k, got[k], v)
		}
	}

	// Load the file into a real redis-server (on a free loopback port, in a
	// temporary directory) and read the settings back.
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not on PATH: %v", err)
	}
	port, err := freeport.Port(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("redis.conf")
	var logb bytes.Buffer
	cmd := exec.Command(bin, abs, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", t.TempDir(), "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = &logb, &logb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()
	rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))})
	defer func() { _ = rc.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for rc.Ping(ctx).Err() != nil {
		select {
		case <-exited:
			t.Fatalf("redis-server with deploy/redis.conf exited:\n%s", logb.String())
		default:
		}
		if ctx.Err() != nil {
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("redis-server with deploy/redis.conf did not answer in 15s:\n%s", logb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for k, v := range want {
		res, err := rc.ConfigGet(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if res[k] != v {
			t.Errorf("running redis-server: %s = %q, want %q", k, res[k], v)
		}
	}
}

// k8s returns every manifest in k8s/ by "Kind/name".
func k8s(t *testing.T) map[string]doc {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in k8s/: %v", err)
	}
	out := map[string]doc{}
	for _, f := range files {
		for _, d := range readYAML(t, f) {
			if str(d, "apiVersion") == "" || str(d, "kind") == "" {
				t.Errorf("%s: document without apiVersion or kind", f)
				continue
			}
			if str(d, "kind") == "Kustomization" {
				out["Kustomization/"+filepath.Base(f)] = d
				continue
			}
			if str(d, "metadata.name") == "" {
				t.Errorf("%s: %s without metadata.name", f, str(d, "kind"))
			}
			out[str(d, "kind")+"/"+str(d, "metadata.name")] = d
		}
	}
	return out
}

func TestKubernetes(t *testing.T) {
	m := k8s(t)
	dep := m["Deployment/leasehold-worker"]
	if dep == nil {
		t.Fatalf("no Deployment leasehold-worker; have %v", keys(m))
	}
	if str(dep, "apiVersion") != "apps/v1" {
		t.Errorf("Deployment apiVersion %q", str(dep, "apiVersion"))
	}
	podLabels, _ := get(dep, "spec.template.metadata.labels").(map[string]any)
	sel, _ := get(dep, "spec.selector.matchLabels").(map[string]any)
	if len(sel) == 0 || !subset(sel, podLabels) {
		t.Errorf("selector %v does not match pod labels %v", sel, podLabels)
	}
	containers := list(dep, "spec.template.spec.containers")
	if len(containers) != 1 {
		t.Fatalf("%d containers", len(containers))
	}
	c := containers[0]
	ports := map[string]string{}
	for _, p := range list(c, "ports") {
		ports[str(p, "name")] = str(p, "containerPort")
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if got := str(c, probe+".httpGet.path"); got != path {
			t.Errorf("%s path %q, want %s", probe, got, path)
		}
		if port := str(c, probe+".httpGet.port"); ports[port] == "" && !slices.Contains(mapValues(ports), port) {
			t.Errorf("%s port %q is not a container port %v", probe, port, ports)
		}
	}
	// /readyz answers within a second (from the worker's last check): the
	// probe must give it more than that.
	if to := str(c, "readinessProbe.timeoutSeconds"); to == "" || to == "1" {
		t.Errorf("readinessProbe.timeoutSeconds %q: want 2 or more, /readyz takes up to a second", to)
	}
	for _, r := range []string{"requests.cpu", "requests.memory", "limits.memory"} {
		if str(c, "resources."+r) == "" {
			t.Errorf("container resources.%s missing", r)
		}
	}

	// Settings from the ConfigMap, Redis credentials from the Secret.
	var cmName string
	for _, ef := range list(c, "envFrom") {
		cmName = cmp(cmName, str(ef, "configMapRef.name"))
	}
	cm := m["ConfigMap/"+cmName]
	if cm == nil {
		t.Fatalf("envFrom ConfigMap %q not defined", cmName)
	}
	data, _ := cm["data"].(map[string]any)
	vars := map[string]string{}
	for k, v := range data {
		vars[k] = fmt.Sprint(v)
	}
	checkWorkerEnv(t, "ConfigMap "+cmName, vars)
	var secretRef string
	for _, e := range list(c, "env") {
		if str(e, "name") == "REDIS_URL" {
			secretRef = str(e, "valueFrom.secretKeyRef.name") + "/" + str(e, "valueFrom.secretKeyRef.key")
		}
	}
	if secretRef != "leasehold-redis/REDIS_URL" {
		t.Errorf("REDIS_URL comes from %q, want the Secret leasehold-redis/REDIS_URL", secretRef)
	}
	if _, inCM := vars["REDIS_URL"]; inCM {
		t.Error("the ConfigMap holds REDIS_URL: credentials belong in the Secret")
	}
	if s := m["Secret/leasehold-redis"]; s == nil || str(s, "stringData.REDIS_URL") == "" {
		t.Error("secret.example.yaml does not show the leasehold-redis Secret with REDIS_URL")
	}

	// SIGTERM drains: the grace period outlasts the worker's drain time.
	grace, _ := strconv.Atoi(str(dep, "spec.template.spec.terminationGracePeriodSeconds"))
	drain, err := time.ParseDuration(vars["LEASEHOLD_SHUTDOWN_TIMEOUT"])
	if err != nil || time.Duration(grace)*time.Second <= drain {
		t.Errorf("terminationGracePeriodSeconds %d does not outlast LEASEHOLD_SHUTDOWN_TIMEOUT %q", grace, vars["LEASEHOLD_SHUTDOWN_TIMEOUT"])
	}

	// The metrics Service selects the pods and targets the HTTP port.
	svc := m["Service/leasehold-worker-metrics"]
	if svc == nil {
		t.Fatal("no Service leasehold-worker-metrics")
	}
	ssel, _ := get(svc, "spec.selector").(map[string]any)
	if len(ssel) == 0 || !subset(ssel, podLabels) {
		t.Errorf("Service selector %v does not match pod labels %v", ssel, podLabels)
	}
	tp := str(svc, "spec.ports.0.targetPort")
	if ports[tp] == "" && !slices.Contains(mapValues(ports), tp) {
		t.Errorf("Service targetPort %q is not a container port %v", tp, ports)
	}
	ann, _ := get(svc, "metadata.annotations").(map[string]any)
	if fmt.Sprint(ann["prometheus.io/path"]) != "/metrics" || fmt.Sprint(ann["prometheus.io/port"]) != ports[tp] && fmt.Sprint(ann["prometheus.io/port"]) != tp {
		t.Errorf("Service scrape annotations %v do not point at /metrics on the container port", ann)
	}

	// The kustomization lists files that exist, and not the example Secret.
	kz := m["Kustomization/kustomization.yaml"]
	if kz == nil {
		t.Fatal("no kustomization.yaml")
	}
	for _, r := range list(kz, "resources") {
		if _, err := os.Stat(filepath.Join("k8s", fmt.Sprint(r))); err != nil {
			t.Errorf("kustomization resource: %v", err)
		}
		if strings.Contains(fmt.Sprint(r), "secret") {
			t.Errorf("kustomization applies %v: secrets are created out of band", r)
		}
	}
}

func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/leasehold.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard without uid, title or panels")
	}
	exported := map[string]bool{}
	labels := map[string][]string{} // series name -> labels
	for _, mi := range tracing.Catalog() {
		series := []string{mi.Prometheus}
		if mi.Kind == tracing.KindHistogram {
			series = []string{mi.Prometheus + "_bucket", mi.Prometheus + "_sum", mi.Prometheus + "_count"}
		}
		for _, s := range series {
			l := append([]string{"instance", "job"}, mi.Labels...)
			if strings.HasSuffix(s, "_bucket") {
				l = append(l, "le")
			}
			labels[s] = l
		}
	}
	for _, n := range tracing.PrometheusNames() {
		exported[n] = true
	}
	metricRE := regexp.MustCompile(`\bleasehold_[a-z0-9_]+\b`)
	byRE := regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	used := map[string]bool{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricRE.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q query %q names no leasehold metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				if !exported[n] {
					t.Errorf("panel %q queries %s, which the worker does not export (tracing.PrometheusNames)", p.Title, n)
					continue
				}
				used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")] = true
				for _, grp := range byRE.FindAllStringSubmatch(tg.Expr, -1) {
					for _, l := range strings.Split(grp[1], ",") {
						if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels[n], l) {
							t.Errorf("panel %q groups %s by %q, not one of its labels %v", p.Title, n, l, labels[n])
						}
					}
				}
			}
		}
	}
	for _, mi := range tracing.Catalog() {
		if !used[mi.Prometheus] {
			t.Errorf("no panel shows %s (%s)", mi.Prometheus, mi.Description)
		}
	}
}

func subset(a, b map[string]any) bool {
	for k, v := range a {
		if fmt.Sprint(b[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

func keys(m map[string]doc) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
