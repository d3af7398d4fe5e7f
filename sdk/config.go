package sdk

import (
	"fmt"
	"math"
	"time"
)

// Config is an operator's configuration from the job spec.
type Config map[string]any

// Int returns key as an integer, or def when absent.
func (c Config) Int(key string, def int64) (int64, error) {
	v, ok := c[key]
	if !ok || v == nil {
		return def, nil
	}
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) {
			return 0, fmt.Errorf("config %q: %v is not an integer", key, n)
		}
		return int64(n), nil
	case int:
		return int64(n), nil
	case int64:
		return n, nil
	default:
		return 0, fmt.Errorf("config %q: want an integer, got %T", key, v)
	}
}

// Float returns key as a number, or def when absent.
func (c Config) Float(key string, def float64) (float64, error) {
	v, ok := c[key]
	if !ok || v == nil {
		return def, nil
	}
	switch n := v.(type) {
	case float64:
		return n, nil
	case int:
		return float64(n), nil
	case int64:
		return float64(n), nil
	default:
		return 0, fmt.Errorf("config %q: want a number, got %T", key, v)
	}
}

// String returns key as a string, or def when absent.
func (c Config) String(key, def string) (string, error) {
	v, ok := c[key]
	if !ok || v == nil {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("config %q: want a string, got %T", key, v)
	}
	return s, nil
}

// Duration returns key as a Go duration string ("1s"), or def when absent.
func (c Config) Duration(key string, def time.Duration) (time.Duration, error) {
	s, err := c.String(key, "")
	if err != nil || s == "" {
		return def, err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("config %q: %w", key, err)
	}
	return d, nil
}

// Sub returns the mapping at key as a Config, or nil when absent.
func (c Config) Sub(key string) (Config, error) {
	v, ok := c[key]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("config %q: want a mapping, got %T", key, v)
	}
	return Config(m), nil
}
