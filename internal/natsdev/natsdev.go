// Package natsdev runs the NATS JetStream server `hookflow dev` offers as a
// broker destination to try: the real server (nats-server's own module),
// embedded, on loopback, with a stream that captures every subject under
// "dev." — the stream a broker destination writes into is its user's, and
// this is the dev user's, so an endpoint of type nats with a subject under
// "dev." works at once.
package natsdev

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream and Subjects are the dev stream's name and what it captures.
const (
	Stream   = "HOOKFLOW_DEV"
	Subjects = "dev.>"
)

// Server is the running server.
type Server struct {
	ns *server.Server
}

// Start runs a JetStream server on 127.0.0.1:port keeping its data under
// dir, and makes sure the dev stream exists.
func Start(ctx context.Context, dir string, port int) (*Server, error) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true,
		ServerName: "hookflow-dev"})
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("nats: not ready on %s in 30s", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	s := &Server{ns: ns}
	if err := s.ensureStream(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) ensureStream(ctx context.Context) error {
	nc, err := nats.Connect(s.URL(), nats.Name("hookflow-dev"))
	if err != nil {
		return fmt.Errorf("nats: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Limits retention keeps each lane's last message, which the exactly-once
	// check of every write reads; direct get reads it in one round trip.
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: Stream, Subjects: []string{Subjects},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, AllowDirect: true})
	if err != nil {
		return fmt.Errorf("nats: create stream %s: %w", Stream, err)
	}
	return nil
}

// URL is the server's address for clients.
func (s *Server) URL() string { return s.ns.ClientURL() }

// Stop shuts the server down.
func (s *Server) Stop() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}
