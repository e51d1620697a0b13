package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hookflow/hookflow/kit/localpg"
)

var syscallZero = syscall.Signal(0)

// pgHolder owns the run's Postgres, which a fault replaces mid-run.
type pgHolder struct {
	cfg    localpg.Config
	logger *slog.Logger
	mu     sync.Mutex
	pg     *localpg.Cluster
	cpu    time.Duration // of the incarnations that have ended
}

func (h *pgHolder) cpuTime() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cpu
}

func (h *pgHolder) get() *localpg.Cluster {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pg
}

func (h *pgHolder) start(ctx context.Context) error {
	pg, err := localpg.Start(ctx, h.cfg, h.logger)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.pg = pg
	h.mu.Unlock()
	return nil
}

// restart crashes Postgres (SIGKILL of the postmaster) and starts it again
// on the same port and data folder. Its backends notice the postmaster's
// death and exit; until the last one has, the new server refuses to start
// on the old shared memory, so starting is retried. When a crash restart
// cannot get going it falls back to a fast shutdown.
func (h *pgHolder) restart(ctx context.Context) (string, error) {
	cpu := postmasterCPU(h.cfg.DataDir)
	h.get().Kill()
	h.mu.Lock()
	h.cpu += cpu
	h.mu.Unlock()
	how := "SIGKILL"
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := h.start(ctx)
		if err == nil {
			return how, nil
		}
		h.logger.Warn("postgres start after crash failed; retrying", "error", err)
		if ctx.Err() != nil {
			return how, ctx.Err()
		}
		if time.Now().After(deadline) {
			return how, fmt.Errorf("postgres would not start again after SIGKILL: %w", err)
		}
		time.Sleep(time.Second)
	}
}

// stop shuts Postgres down, adding the CPU time it used since its last
// start (the postmaster and every backend it reaped, read from /proc just
// before) to cpuTime.
func (h *pgHolder) stop() {
	pg := h.get()
	if pg == nil {
		return
	}
	cpu := postmasterCPU(h.cfg.DataDir)
	pg.Stop()
	h.mu.Lock()
	h.cpu += cpu
	h.mu.Unlock()
}

// postmasterCPU reads utime+stime+cutime+cstime of the postmaster.
func postmasterCPU(dataDir string) time.Duration {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:15] { // utime stime cutime cstime (fields 14-17)
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}
