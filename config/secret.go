package config

import (
	"fmt"
	"os"
	"strings"
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
