package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Toxic is one fault of a Proxy, in toxiproxy's terms: Type is one of
// toxiproxy's toxics (latency, bandwidth, slow_close, timeout, reset_peer,
// slicer, limit_data), Stream is "upstream" (client to server) or
// "downstream", Toxicity is the share of connections it strikes, and
// Attributes are the toxic's own settings (milliseconds, KB/s, bytes).
type Toxic struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream"`
	Toxicity   float32        `json:"toxicity"`
	Attributes map[string]any `json:"attributes"`
}

// Proxy is a fault-injecting TCP proxy listening on a loopback port,
// toxiproxy run in process. Build it with NewProxy and stop it with Close.
type Proxy struct {
	p *toxiproxy.Proxy
}

// NewProxy starts a proxy on a free loopback port that forwards to upstream
// (host:port) through toxics. It logs nothing.
func NewProxy(upstream string, toxics ...Toxic) (*Proxy, error) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "chaos", "127.0.0.1:0", upstream)
	for _, t := range toxics {
		js, err := json.Marshal(t)
		if err != nil {
			return nil, fmt.Errorf("chaos: toxic %q: %w", t.Name, err)
		}
		if _, err := p.Toxics.AddToxicJson(bytes.NewReader(js)); err != nil {
			return nil, fmt.Errorf("chaos: toxic %q: %w", t.Name, err)
		}
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("chaos: start proxy to %s: %w", upstream, err)
	}
	return &Proxy{p: p}, nil
}

// Addr returns the proxy's listening address, host:port.
func (p *Proxy) Addr() string { return p.p.Listen }

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() { p.p.Stop() }
