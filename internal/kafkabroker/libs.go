package kafkabroker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// LibsEnv names the environment variable that points at a directory of the
// broker's jars, as tools/kafka/fetch.sh prints it. The Makefile sets it, so
// that tests and the chaos run do not each ask Maven.
const LibsEnv = "KAFKA_LIBS"

// Libs returns the directory of the broker's jars: $KAFKA_LIBS if set, else
// what tools/kafka/fetch.sh prints (it resolves them with Maven on first use
// and caches them outside the repository). fetch.sh is found by walking up
// from the working directory to the module root.
func Libs(ctx context.Context) (string, error) {
	if dir := os.Getenv(LibsEnv); dir != "" {
		if _, err := os.Stat(dir); err != nil { //nolint:gosec // KAFKA_LIBS is the operator's to set
			return "", fmt.Errorf("kafkabroker: %s=%s: %w", LibsEnv, dir, err)
		}
		return dir, nil
	}
	script, err := fetchScript()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, script) //nolint:gosec // the repository's own script
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkabroker: %s: %w: %s", script, err, tail(errb.String(), 2000))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1], nil
}

func fetchScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("kafkabroker: %w", err)
	}
	for {
		p := filepath.Join(dir, "tools", "kafka", "fetch.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kafkabroker: tools/kafka/fetch.sh not found above the working directory; " +
				"run from the leasehold repository or set " + LibsEnv + " to the directory fetch.sh prints")
		}
		dir = parent
	}
}
