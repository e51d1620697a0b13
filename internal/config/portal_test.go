package config

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPortalBase: the setting wins; else the API's bound address, an
// unspecified host made one a local browser reaches.
func TestPortalBase(t *testing.T) {
	require.Equal(t, "https://hooks.example.com", PortalBase("https://hooks.example.com", "0.0.0.0:8080"))
	require.Equal(t, "http://127.0.0.1:8080", PortalBase("", "127.0.0.1:8080"))
	require.Equal(t, "http://127.0.0.1:8080", PortalBase("", "0.0.0.0:8080"))
	require.Equal(t, "http://127.0.0.1:9000", PortalBase("", ":9000"))
	require.Equal(t, "http://127.0.0.1:9000", PortalBase("", "[::]:9000"))
	require.Equal(t, "http://[::1]:9000", PortalBase("", "[::1]:9000"))
}

// TestPortalBaseURLSetting: an absolute http(s) URL, its trailing slash
// dropped; anything else is a usage error naming the variable.
func TestPortalBaseURLSetting(t *testing.T) {
	names := []string{"HOOKFLOW_PORTAL_BASE_URL"}
	c, _, err := Load("api", "", names, nil, env(map[string]string{"HOOKFLOW_PORTAL_BASE_URL": "https://hooks.example.com/hookflow/"}), nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "https://hooks.example.com/hookflow", c.PortalBaseURL)
	for _, bad := range []string{"hooks.example.com", "ftp://hooks.example.com", "https://hooks.example.com/?x=1", "https://hooks.example.com/#f"} {
		_, _, err := Load("api", "", names, nil, env(map[string]string{"HOOKFLOW_PORTAL_BASE_URL": bad}), nil, io.Discard)
		var ue *UsageError
		require.ErrorAs(t, err, &ue, bad)
		require.Contains(t, ue.Msg, "HOOKFLOW_PORTAL_BASE_URL", bad)
	}
}
