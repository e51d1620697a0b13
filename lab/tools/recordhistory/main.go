// Command recordhistory writes a closed workflow's history as JSON, the
// format workflows/replay_test.go replays (what `temporal workflow show
// --output json` prints), so a history can be recorded without the
// Temporal CLI:
//
//	go run ./lab/tools/recordhistory -address 127.0.0.1:7233 -workflow-id <id> > workflows/testdata/<name>_history.json
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
)

func main() {
	address := flag.String("address", "127.0.0.1:7233", "Temporal frontend host:port")
	namespace := flag.String("namespace", "default", "Temporal namespace")
	id := flag.String("workflow-id", "", "workflow ID (its latest run is written)")
	runID := flag.String("run-id", "", "run ID (default: the latest run)")
	flag.Parse()
	if err := run(*address, *namespace, *id, *runID); err != nil {
		fmt.Fprintln(os.Stderr, "recordhistory:", err)
		os.Exit(1)
	}
}

func run(address, namespace, id, runID string) error {
	if id == "" {
		return fmt.Errorf("-workflow-id is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: address, Namespace: namespace})
	if err != nil {
		return err
	}
	defer c.Close()
	var h historypb.History
	it := c.GetWorkflowHistory(ctx, id, runID, false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		h.Events = append(h.Events, ev)
	}
	out, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(&h)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(out, '\n'))
	return err
}
