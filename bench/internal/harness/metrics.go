package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sample is one line of the Prometheus text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics is one scrape.
type Metrics []Sample

var httpClient = &http.Client{Timeout: 5 * time.Second}

// Scrape fetches and parses http://addr/metrics.
func Scrape(ctx context.Context, addr string) (Metrics, error) {
	return scrape(ctx, httpClient, "http", addr)
}

// scrape fetches and parses scheme://addr/metrics with client.
func scrape(ctx context.Context, client *http.Client, scheme, addr string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", addr, resp.Status)
	}
	return Parse(resp.Body)
}

// Parse reads the Prometheus text exposition format (the subset the Go
// client writes: no timestamps, escaped label values).
func Parse(r io.Reader) (Metrics, error) {
	var out Metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		var s Sample
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			s.Name = line[:i]
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return nil, fmt.Errorf("metrics: bad line %q", line)
			}
			s.Labels = parseLabels(line[i+1 : j])
			rest = line[j+1:]
		} else {
			i := strings.IndexByte(line, ' ')
			if i < 0 {
				return nil, fmt.Errorf("metrics: bad line %q", line)
			}
			s.Name, rest = line[:i], line[i:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("metrics: bad line %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: bad value in %q", line)
		}
		s.Value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseLabels(s string) map[string]string {
	m := map[string]string{}
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			break
		}
		name := strings.TrimSpace(strings.TrimPrefix(s[:eq], ","))
		var val strings.Builder
		i := eq + 2
		for ; i < len(s); i++ {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			if c == '"' {
				break
			}
			val.WriteByte(c)
		}
		m[name] = val.String()
		s = strings.TrimPrefix(s[min(i+1, len(s)):], ",")
	}
	return m
}

// Sum adds the values of the samples named name whose labels include every
// pair in match.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	var t float64
	for _, s := range m {
		if s.Name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			t += s.Value
		}
	}
	return t
}
