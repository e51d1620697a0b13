package main

// hookflow dev's names, in every build: the CLI's API commands (dlq, keys,
// status, demo) default to them, so that they talk to hookflow dev as it is.
const (
	// devToken is hookflow dev's bootstrap admin token.
	devToken = "dev-token"
	// devEndpointID names the endpoint hookflow dev registers for its
	// receiver.
	devEndpointID = "ep_dev_receiver"
)
