package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports in practice; reading it
// would need cgo (sysconf).
const clockTicks = 100

// procStat is what /proc/<pid>/stat tells about one process.
type procStat struct {
	ppid int
	cpu  float64 // utime+stime of every thread, seconds
	// reaped is cutime+cstime: the CPU of children it has waited for.
	reaped float64
}

// readStat parses /proc/<pid>/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(b))
}

func parseStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("parse /proc stat: no ')' in %q", s)
	}
	// After ')': state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("parse /proc stat: %d fields after the name", len(f))
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseUint(f[11], 10, 64)
	st, err3 := strconv.ParseUint(f[12], 10, 64)
	cut, err4 := strconv.ParseInt(f[13], 10, 64)
	cst, err5 := strconv.ParseInt(f[14], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
		return procStat{}, fmt.Errorf("parse /proc stat: bad numbers in %q", s)
	}
	return procStat{ppid: ppid, cpu: float64(ut+st) / clockTicks, reaped: float64(cut+cst) / clockTicks}, nil
}

// rssMB is the resident set size of pid in MiB (VmRSS), 0 when unknown.
func rssMB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// treeCPU sums the CPU seconds of root, its live children and the children
// it has reaped: a Postgres postmaster and its backends. A backend that exits
// moves its CPU from the live sum to the postmaster's cutime+cstime, so the
// total never drops when connection pools recycle connections.
func treeCPU(root int) float64 {
	total := 0.0
	if st, err := readStat(root); err == nil {
		total += st.cpu + st.reaped
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return total
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == root {
			continue
		}
		st, err := readStat(pid)
		if err == nil && st.ppid == root {
			total += st.cpu
		}
	}
	return total
}

// postmasterPID reads the pid of the server running on dataDir.
func postmasterPID(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("read postmaster.pid: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("parse postmaster.pid: %w", err)
	}
	return pid, nil
}

// cpuSnapshot is CPU seconds per measured process at one instant.
type cpuSnapshot map[string]float64

// sub returns s - before, per process.
func (s cpuSnapshot) sub(before cpuSnapshot) cpuSnapshot {
	out := cpuSnapshot{}
	for k, v := range s {
		out[k] = v - before[k]
	}
	return out
}
