package spawn

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPauseWaitsForEveryThread pauses a busy child of several threads: when
// Pause returns, every thread is stopped and the child's CPU time no longer
// moves.
func TestPauseWaitsForEveryThread(t *testing.T) {
	cmd := exec.Command("python3", "-c", `
import threading
def spin():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=spin, daemon=True).start()
print("up", flush=True)
spin()
`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = Wait(cmd)
	})
	// A whole line: one Read of a pipe may return part of it.
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("child did not start its threads: %q %v", line, err)
	}
	pid := cmd.Process.Pid
	if err := Pause(pid, false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 5 {
		t.Fatalf("child has %d threads, want at least 5", len(tasks))
	}
	before := cpuTicks(t, pid)
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n, err := runningThreads(pid); err != nil || n != 0 {
			t.Fatalf("after Pause: %d threads running (err %v)", n, err)
		}
	}
	if after := cpuTicks(t, pid); after != before {
		t.Fatalf("a paused child used CPU: %d ticks -> %d", before, after)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, pid)
}

func TestPauseOfMissingProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if err := Wait(cmd); err != nil {
		t.Fatal(err)
	}
	if err := Pause(pid, false, time.Second); err == nil {
		t.Fatal("Pause of a reaped process returned nil")
	}
}

// cpuTicks is the user + system time of pid in clock ticks.
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	// After the state: fields 14 (utime) and 15 (stime) of stat are at 11 and 12.
	return atoi(t, f[11]) + atoi(t, f[12])
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitRunning waits until some thread of pid runs again after SIGCONT.
func waitRunning(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := runningThreads(pid)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("child still stopped 10 s after SIGCONT")
		}
		time.Sleep(time.Millisecond)
	}
}
