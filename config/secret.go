package config

import (
	"fmt"
	"os"
	"strings"

	promconfig "github.com/prometheus/common/config"
)

// APIKey resolves the target's API key from its file or environment variable.
// Errors name the source, never the value.
func (t Target) APIKey() (string, error) {
	switch {
	case t.APIKeyFile != "":
		b, err := os.ReadFile(t.APIKeyFile)
		if err != nil {
			return "", fmt.Errorf("target %s: read api_key_file: %w", t.Name, err)
		}
		return strings.TrimSpace(string(b)), nil
	case t.APIKeyEnv != "":
		v, ok := os.LookupEnv(t.APIKeyEnv)
		if !ok {
			return "", fmt.Errorf("target %s: api_key_env %s is not set", t.Name, t.APIKeyEnv)
		}
		return strings.TrimSpace(v), nil
	}
	return "", nil
}

// credential is one credential an HTTP client configuration sends: inline,
// or read from a file, named by its path under http_client_config.
type credential struct {
	path   string
	inline promconfig.Secret
	file   string
}

// credentials lists the credentials an http_client_config sets.
func credentials(h promconfig.HTTPClientConfig) []credential {
	var out []credential
	if a := h.Authorization; a != nil {
		out = append(out, credential{"authorization.credentials_file", a.Credentials, a.CredentialsFile})
	}
	if b := h.BasicAuth; b != nil {
		out = append(out, credential{"basic_auth.password_file", b.Password, b.PasswordFile})
	}
	if o := h.OAuth2; o != nil {
		out = append(out, credential{"oauth2.client_secret_file", o.ClientSecret, o.ClientSecretFile})
	}
	if h.BearerToken != "" || h.BearerTokenFile != "" {
		out = append(out, credential{"bearer_token_file", h.BearerToken, h.BearerTokenFile})
	}
	return out
}

// WithoutCredentials is h with every credential removed: for a page on
// another host, which gets the TLS and proxy settings but no key. Headers
// keep their plain values and lose their secrets and files.
func WithoutCredentials(h promconfig.HTTPClientConfig) promconfig.HTTPClientConfig {
	h.Authorization, h.BasicAuth, h.OAuth2, h.BearerToken, h.BearerTokenFile = nil, nil, nil, "", ""
	if h.HTTPHeaders != nil {
		plain := &promconfig.Headers{Headers: map[string]promconfig.Header{}}
		for name, v := range h.HTTPHeaders.Headers {
			if len(v.Values) > 0 {
				plain.Headers[name] = promconfig.Header{Values: v.Values}
			}
		}
		h.HTTPHeaders = plain
	}
	return h
}

// held lists, beside credentials, every other secret an HTTP client
// configuration holds: header secrets and files, proxy credentials, TLS
// keys and OAuth2's own. A server may echo any header it got, and an error
// may quote a proxy URL.
func held(h promconfig.HTTPClientConfig) (inline []string, files []string) {
	proxy := func(p promconfig.ProxyConfig, tls promconfig.TLSConfig) {
		if u := p.ProxyURL.URL; u != nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				inline = append(inline, pw)
			}
		}
		for _, vs := range p.ProxyConnectHeader {
			for _, v := range vs {
				inline = append(inline, string(v))
			}
		}
		inline = append(inline, string(tls.Key))
		files = append(files, tls.KeyFile)
	}
	proxy(h.ProxyConfig, h.TLSConfig)
	if h.HTTPHeaders != nil {
		for _, v := range h.HTTPHeaders.Headers {
			for _, s := range v.Secrets {
				inline = append(inline, string(s))
			}
			files = append(files, v.Files...)
		}
	}
	if o := h.OAuth2; o != nil {
		proxy(o.ProxyConfig, o.TLSConfig)
		inline = append(inline, string(o.ClientCertificateKey))
		for _, v := range o.EndpointParams {
			inline = append(inline, v)
		}
	}
	return inline, files
}

// Secrets lists every credential the target sends, read now, for
// redaction: the API key and what its http_client_config holds inline or
// in files (authorization, basic auth, OAuth2, bearer token, header
// secrets and files, proxy credentials, TLS keys). Unreadable files are
// skipped; check-config reports them.
func (t Target) Secrets() []string {
	var out []string
	if k, err := t.APIKey(); err == nil && k != "" {
		out = append(out, k)
	}
	inline, files := held(t.HTTPClientConfig)
	for _, c := range credentials(t.HTTPClientConfig) {
		inline, files = append(inline, string(c.inline)), append(files, c.file)
	}
	for _, s := range inline {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		if b, err := os.ReadFile(f); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			out = append(out, strings.TrimSpace(string(b)))
		}
	}
	return out
}
