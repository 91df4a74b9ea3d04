package monitor

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/version"

	"github.com/headroom-dev/headroom/config"
	"github.com/headroom-dev/headroom/probe"
)

// idleTimeout is how long an idle connection to a target is kept. An
// engine scraped every few seconds keeps its own alive; a burst's
// connections, and those of a target probed every few minutes, go. It was
// 15 minutes: a fleet kept about 40 goroutines a target after its bursts.
const idleTimeout = 30 * time.Second

// clients are the HTTP clients of the monitor's targets, one per
// http_client_config: the targets a discovery template finds share one
// transport and its idle connections, rather than two each. A client is
// made at its first user and closed after its last.
type clients struct {
	dial DialFunc // nil: the network's

	mu   sync.Mutex
	list []*sharedClient
}

type sharedClient struct {
	cfg    promconfig.HTTPClientConfig
	client *http.Client
	users  int
}

// get returns the client of cfg, made if no target uses one yet.
func (c *clients) get(cfg promconfig.HTTPClientConfig) (*http.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.list {
		if reflect.DeepEqual(s.cfg, cfg) {
			s.users++
			return s.client, nil
		}
	}
	opts := []promconfig.HTTPClientOption{promconfig.WithIdleConnTimeout(idleTimeout), promconfig.WithUserAgent("headroom/" + version.Version)}
	if c.dial != nil {
		opts = append(opts, promconfig.WithDialContextFunc(c.dial))
	}
	client, err := promconfig.NewClientFromConfig(cfg, "headroom", opts...)
	if err != nil {
		return nil, err
	}
	// Redirects stay within the target's scheme, host and port
	// (probe.SameOrigin), where follow_redirects leaves them on: the
	// client's round tripper sets its credentials on every request it sends.
	if client.CheckRedirect == nil {
		client.CheckRedirect = probe.SameOrigin
	}
	c.list = append(c.list, &sharedClient{cfg: cfg, client: client, users: 1})
	return client, nil
}

// put gives a client back: after its last user, its idle connections close.
func (c *clients) put(client *http.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.list {
		if s.client != client {
			continue
		}
		if s.users--; s.users == 0 {
			client.CloseIdleConnections()
			c.list = append(c.list[:i], c.list[i+1:]...)
		}
		return
	}
}

// forTarget returns a target's clients from its http_client_config. A
// metrics page on another host gets the same TLS and proxy settings but
// none of the credentials, as metricsKey withholds the API key.
func (c *clients) forTarget(tc config.Target, sameHost bool) (client, metrics *http.Client, err error) {
	client, err = c.get(tc.HTTPClientConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("target %s: http_client_config: %w", tc.Name, err)
	}
	if sameHost {
		return client, client, nil
	}
	metrics, err = c.get(config.WithoutCredentials(tc.HTTPClientConfig))
	if err != nil {
		c.put(client)
		return nil, nil, fmt.Errorf("target %s: http_client_config for metrics_url: %w", tc.Name, err)
	}
	return client, metrics, nil
}
