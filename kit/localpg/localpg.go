// Package localpg runs a PostgreSQL cluster from the server binaries
// installed on this machine, without Docker: the database of hookflow dev,
// and the throwaway clusters tests run against (see Suite), hookflow's own
// and those of a receiver built on the kit.
package localpg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrMissing is returned when no PostgreSQL server binaries are found.
var ErrMissing = errors.New("PostgreSQL server binaries not found (initdb, postgres); install them with: apt-get update && apt-get install -y postgresql")

// Config says where the cluster lives and how it listens.
type Config struct {
	// DataDir holds the cluster; it is created with initdb when empty.
	DataDir string
	// Port is the TCP port on 127.0.0.1.
	Port int
	// Fast turns off fsync for throwaway clusters (tests). Never for data you keep.
	Fast bool
	// LogFile receives the server's output; empty means DataDir/../postgres.log.
	LogFile string
}

// Cluster is a running cluster started by Start (or found by Attach).
type Cluster struct {
	cfg    Config
	cmd    *exec.Cmd
	done   chan struct{}
	logger *slog.Logger
	// attached: not ours to stop.
	attached bool
}

// FindBin returns the folder holding initdb and postgres: PATH first,
// then the newest /usr/lib/postgresql/*/bin.
func FindBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrMissing
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Start initialises the cluster when needed and starts the server,
// returning once it accepts connections. As root the server runs as the
// "postgres" user (PostgreSQL refuses to run as root).
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	if cfg.LogFile == "" {
		cfg.LogFile = filepath.Join(filepath.Dir(cfg.DataDir), "postgres.log")
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := reachable(filepath.Dir(cfg.DataDir), cred.Uid); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create postgres data dir: %w", err)
	}
	if cred != nil {
		if err := os.Chown(cfg.DataDir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("chown postgres data dir: %w", err)
		}
	}
	if !isFile(filepath.Join(cfg.DataDir, "PG_VERSION")) {
		logger.Info("initialising postgres cluster", "data_dir", cfg.DataDir)
		initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", cfg.DataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
		initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := initdb.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("initdb: %w: %s", err, lastLine(out))
		}
	}
	stopStale(cfg.DataDir)
	if err := PortFree(cfg.Port); err != nil {
		return nil, err
	}

	logf, err := os.OpenFile(cfg.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open postgres log: %w", err)
	}
	args := []string{"-D", cfg.DataDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port=" + strconv.Itoa(cfg.Port),
		"-c", "unix_socket_directories=",
		"-c", "max_connections=300",
		"-c", "shared_buffers=256MB",
	}
	if cfg.Fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: a Ctrl-C at the terminal reaches hookflow, which then
	// stops Postgres in order instead of both racing to exit.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	p := &Cluster{cfg: cfg, cmd: cmd, done: make(chan struct{}), logger: logger}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, p.AdminURL("postgres"))
		if err == nil {
			conn.Close(ctx)
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("postgres exited during start-up; see %s", cfg.LogFile)
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("postgres did not accept connections within 60s; see %s", cfg.LogFile)
		}
	}
}

// Attach returns a handle on a cluster already running on 127.0.0.1:port
// (superuser "postgres", trust auth), started by someone else. Stop and Kill
// do nothing on it.
func Attach(port int) *Cluster {
	done := make(chan struct{})
	return &Cluster{cfg: Config{Port: port}, done: done, attached: true}
}

// AdminURL is the DSN of database db as the cluster's superuser.
func (p *Cluster) AdminURL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.cfg.Port, db)
}

// Port is the TCP port the server listens on.
func (p *Cluster) Port() int { return p.cfg.Port }

// DataDir is the cluster's data folder ("" for an attached cluster).
func (p *Cluster) DataDir() string { return p.cfg.DataDir }

// EnsureDatabase creates database name when it does not exist yet.
func (p *Cluster) EnsureDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, p.AdminURL("postgres"))
	if err != nil {
		return fmt.Errorf("connect postgres: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// Stop shuts the server down with a fast shutdown (open transactions are
// rolled back, committed data is safe) and waits for it to exit.
func (p *Cluster) Stop() {
	if p.attached {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Kill stops the server the hard way (SIGKILL), as a crash would.
func (p *Cluster) Kill() {
	if p.attached {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// SharedDataHome is where DataDirFor keeps a cluster that the server's user
// cannot reach where it was asked for.
const SharedDataHome = "/var/lib/hookflow"

// DataDirFor returns where the cluster for dir lives: dir itself, unless we
// are root and the postgres user, which the server runs as, cannot reach it
// (a clone under a 0700 /root, say). Then it is a folder of its own under
// SharedDataHome, named after dir, and moved is true: the user's folders
// keep their permissions, and the same dir always finds the same cluster.
func DataDirFor(dir string) (path string, moved bool, err error) {
	cred, err := serverCredential()
	if err != nil || cred == nil {
		return dir, false, err
	}
	return dataDirFor(dir, cred.Uid, SharedDataHome)
}

func dataDirFor(dir string, uid uint32, home string) (string, bool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, err
	}
	if reachable(filepath.Dir(abs), uid) == nil {
		return abs, false, nil
	}
	// The server must reach home too; MkdirAll leaves an existing folder's
	// mode alone, so set it.
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", false, fmt.Errorf("create %s: %w", home, err)
	}
	if err := os.Chmod(home, 0o755); err != nil {
		return "", false, fmt.Errorf("chmod %s: %w", home, err)
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(home, "postgres-"+hex.EncodeToString(sum[:6])), true, nil
}

// serverCredential picks the user the server runs as: nil (the current user)
// unless we are root, then "postgres".
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a 'postgres' user to run the server as (apt-get install -y postgresql creates it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// reachable checks that uid can traverse every folder down to dir, since
// the server runs as that user.
func reachable(dir string, uid uint32) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := abs; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil {
			sys, ok := st.Sys().(*syscall.Stat_t)
			if st.Mode().Perm()&0o001 == 0 && !(ok && sys.Uid == uid) {
				return fmt.Errorf("the postgres user cannot reach %s: %s is not traversable (chmod o+x it, or choose another HOOKFLOW_DATA_DIR)", abs, d)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// stopStale ends a server left running on this data dir by a process that
// died without stopping it, so the new start does not fail on the lock.
func stopStale(dataDir string) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return
	}
	proc, err := os.FindProcess(pid)
	if err != nil || proc.Signal(syscall.Signal(0)) != nil {
		return
	}
	_ = proc.Signal(syscall.SIGINT)
	for i := 0; i < 300; i++ {
		if proc.Signal(syscall.Signal(0)) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ErrPortInUse is PortFree's error (wrapped) for a port that is taken.
var ErrPortInUse = errors.New("in use")

// PortFree returns an error naming the port when 127.0.0.1:port is taken
// (ErrPortInUse, wrapped).
func PortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is %w", port, ErrPortInUse)
	}
	return l.Close()
}

// FreeLowPort returns a free TCP port on 127.0.0.1 below 32768. Temporal's
// SQL schema stores membership and RPC ports as smallint, so its ports must
// stay under the kernel's ephemeral range.
func FreeLowPort() (int, error) {
	for i := 0; i < 200; i++ {
		p := 20000 + mrand.IntN(12000)
		if PortFree(p) == nil {
			return p, nil
		}
	}
	return 0, errors.New("no free port below 32768 on 127.0.0.1")
}

// FreePort asks the kernel for a free TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
