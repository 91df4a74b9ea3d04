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

// Secrets lists every credential the target sends, read now, for
// redaction: the API key and what its http_client_config holds inline or
// in files. Unreadable files are skipped; check-config reports them.
func (t Target) Secrets() []string {
	var out []string
	add := func(inline promconfig.Secret, file string) {
		if inline != "" {
			out = append(out, string(inline))
		}
		if file != "" {
			if b, err := os.ReadFile(file); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				out = append(out, strings.TrimSpace(string(b)))
			}
		}
	}
	if k, err := t.APIKey(); err == nil && k != "" {
		out = append(out, k)
	}
	h := t.HTTPClientConfig
	if a := h.Authorization; a != nil {
		add(a.Credentials, a.CredentialsFile)
	}
	if b := h.BasicAuth; b != nil {
		add(b.Password, b.PasswordFile)
	}
	if o := h.OAuth2; o != nil {
		add(o.ClientSecret, o.ClientSecretFile)
	}
	add(h.BearerToken, h.BearerTokenFile)
	return out
}
