package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process of a campaign (the coordinator, the world, a
// worker). Its stdout and stderr go to DIR/logs/<name>.log, every start
// appended, and the last few KB are kept for a violation's report.
type proc struct {
	name string
	bin  string
	args []string
	env  []string // extra environment of the next start only
	logs string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	tail    tailBuffer
	starts  int
	expect  bool // the harness killed or stopped it: its death is not news
	stopped bool // SIGSTOPped
}

// start starts the process (again).
func (p *proc) start() error {
	f, err := os.OpenFile(filepath.Join(p.logs, p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tail.reset()
	fmt.Fprintf(f, "=== start %d: %s %s %s\n", p.starts+1, strings.Join(p.env, " "), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout = f
	cmd.Stderr = multiWriter{f, &p.tail}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.starts++
	p.cmd, p.done, p.expect, p.stopped = cmd, make(chan struct{}), false, false
	done := p.done
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

func (p *proc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// exited reports whether the last start has ended, and whether the harness
// expected it to (it killed the process).
func (p *proc) exited() (bool, bool) {
	if p.running() {
		return false, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return true, p.expect
}

// wait waits up to d for the process to end.
func (p *proc) wait(d time.Duration) bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs the process and waits for it.
func (p *proc) kill() {
	p.mu.Lock()
	p.expect = true
	p.mu.Unlock()
	p.signal(syscall.SIGKILL)
	if p.stopped {
		p.signal(syscall.SIGCONT)
	}
	p.wait(time.Minute)
}

// term stops the process cleanly (SIGTERM; SIGKILL after d).
func (p *proc) term(d time.Duration) {
	p.mu.Lock()
	p.expect = true
	p.mu.Unlock()
	p.signal(syscall.SIGTERM)
	if !p.wait(d) {
		p.signal(syscall.SIGKILL)
		p.wait(time.Minute)
	}
}

// killedBySIGKILL reports whether the last start died of SIGKILL.
func (p *proc) killedBySIGKILL() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.ProcessState == nil {
		return false
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *proc) stderrTail() string { return p.tail.String() }

// logCount counts the lines of the process's log (every start's output)
// that contain s.
func (p *proc) logCount(s string) int {
	b, err := os.ReadFile(filepath.Join(p.logs, p.name+".log"))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

// tailBuffer keeps the last 16 KB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

const tailMax = 16 << 10

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if len(t.b) > tailMax {
		t.b = append([]byte(nil), t.b[len(t.b)-tailMax:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func (t *tailBuffer) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = nil
}

type multiWriter []interface{ Write([]byte) (int, error) }

func (m multiWriter) Write(b []byte) (int, error) {
	for _, w := range m {
		w.Write(b)
	}
	return len(b), nil
}

// findCoordinator is the coordinator binary: next to this one, else on PATH.
func findCoordinator() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "coordinator")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("coordinator")
	if err != nil {
		return "", errors.New("no coordinator binary next to agent-sim or on PATH (make build puts both in bin/)")
	}
	return p, nil
}
