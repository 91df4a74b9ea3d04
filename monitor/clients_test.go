package monitor

import (
	"net/http"
	"testing"

	promconfig "github.com/prometheus/common/config"

	"github.com/headroom-dev/headroom/config"
)

// Targets of one http_client_config share one client, and with it one
// transport and its idle connections; a metrics page elsewhere gets one
// without the credentials; the last target to go closes its client.
func TestClientsShared(t *testing.T) {
	c := &clients{}
	plain := config.Target{Name: "a", HTTPClientConfig: promconfig.DefaultHTTPClientConfig}
	authed := config.Target{Name: "b", HTTPClientConfig: promconfig.DefaultHTTPClientConfig}
	authed.HTTPClientConfig.Authorization = &promconfig.Authorization{Type: "Bearer", Credentials: "sk-x"}
	type pair struct{ client, metrics *http.Client }
	var got []pair
	for range 100 {
		for _, tc := range []struct {
			target   config.Target
			sameHost bool
		}{{plain, true}, {authed, true}, {authed, false}} {
			client, metrics, err := c.forTarget(tc.target, tc.sameHost)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, pair{client, metrics})
		}
	}
	// Two configurations: plain, and authed, whose metrics page elsewhere
	// is reached as a plain one is.
	if len(c.list) != 2 {
		t.Fatalf("%d clients for 300 targets of 2 configurations", len(c.list))
	}
	if got[1].client != got[2].client || got[0].client == got[1].client || got[2].metrics != got[0].client || got[299].client != got[2].client {
		t.Error("targets of one configuration got different clients, or a metrics page elsewhere its target's credentials")
	}
	for i, p := range got {
		c.put(p.client)
		if i%3 == 2 {
			c.put(p.metrics)
		}
	}
	if len(c.list) != 0 {
		t.Errorf("%d clients left after every target went", len(c.list))
	}
}
