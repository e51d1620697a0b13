//go:build !deploy

package main

// devCommands are the commands that link the embedded Temporal server and its
// Web UI (dev, temporal) or drive a stack that runs it (chaos, bench). The
// deploy build (-tags deploy, what the Dockerfile builds) leaves them and
// their files out; commands_deploy.go answers for them there.
func devCommands() map[string]command {
	return map[string]command{
		"dev":      {"run Postgres, Temporal (with Web UI), migrations, the API, workers and the reference receiver on this machine", runDev},
		"chaos":    {"run the stack as real processes under injected faults and check every invariant", runChaos},
		"temporal": {"run only the embedded Temporal server on the local Postgres (chaos and bench use it)", runTemporal},
		"bench":    {"measure throughput and latency against bare Temporal in the same run", runBench},
	}
}
