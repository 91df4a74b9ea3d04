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
// another host, which gets the TLS and proxy settings but no key.
func WithoutCredentials(h promconfig.HTTPClientConfig) promconfig.HTTPClientConfig {
	h.Authorization, h.BasicAuth, h.OAuth2, h.BearerToken, h.BearerTokenFile = nil, nil, nil, "", ""
	return h
}

// Secrets lists every credential the target sends, read now, for
// redaction: the API key and what its http_client_config holds inline or
// in files. Unreadable files are skipped; check-config reports them.
func (t Target) Secrets() []string {
	var out []string
	if k, err := t.APIKey(); err == nil && k != "" {
		out = append(out, k)
	}
	for _, c := range credentials(t.HTTPClientConfig) {
		if c.inline != "" {
			out = append(out, string(c.inline))
		}
		if c.file == "" {
			continue
		}
		if b, err := os.ReadFile(c.file); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			out = append(out, strings.TrimSpace(string(b)))
		}
	}
	return out
}
