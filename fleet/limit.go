package fleet

import (
	"context"
	"fmt"
	"net"
	"slices"

	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/http"
)

// maxSDBody bounds what one refresh of an http_sd endpoint may read: a
// list of 100,000 targets is about 10 MiB. Prometheus's reader has no
// limit of its own, and a body that never ended was read to 262 MB at
// 707 MB of RSS (issue 37).
const maxSDBody = 16 << 20

// errSDBody is the refresh's error, as discovery logs it.
var errSDBody = fmt.Errorf("http_sd answer over the limit of %d MiB", maxSDBody>>20)

// bounded wraps each http_sd mechanism so that its client reads at most
// maxSDBody bytes a refresh, dialing with dial (nil: the network's); the
// other mechanisms are left as they are (a Kubernetes watch streams for
// ever, by design).
func bounded(cs discovery.Configs, dial promconfig.DialContextFunc) discovery.Configs {
	out := slices.Clone(cs)
	for i, c := range out {
		if h, ok := c.(*http.SDConfig); ok {
			out[i] = boundedHTTPSD{h, dial}
		}
	}
	return out
}

// boundedHTTPSD is an http_sd configuration whose client counts what it
// reads. Prometheus's client takes no round tripper of ours, only a dialer:
// the dialer's connections stop reading at the limit, and keep-alives are
// off so that each refresh, on its own connection, gets the whole limit.
type boundedHTTPSD struct {
	*http.SDConfig
	dial promconfig.DialContextFunc
}

func (c boundedHTTPSD) NewDiscoverer(opts discovery.DiscovererOptions) (discovery.Discoverer, error) {
	dial := c.dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	opts.HTTPClientOptions = append(slices.Clone(opts.HTTPClientOptions),
		promconfig.WithDialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &boundedConn{Conn: conn, left: maxSDBody}, nil
		}), promconfig.WithKeepAlivesDisabled())
	return c.SDConfig.NewDiscoverer(opts)
}

// boundedConn fails its reads past its limit.
type boundedConn struct {
	net.Conn
	left int64
}

func (c *boundedConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errSDBody
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
}
