// Package auth holds the control plane's bearer tokens: the token file,
// the roles it grants, and the checks the REST API and the gRPC client
// API run before serving a request.
//
// A token file has one "<role> <token>" per line; blank lines and lines
// starting with # are skipped. Role read may list and get; role admin may
// also submit, cancel, stop, trigger, rescale, configure and dispose.
package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Role is what a token may do. Roles are ordered: Admin may do whatever
// Read may.
type Role int

const (
	// None is no role: requests that need none are open (health, metrics).
	None Role = iota
	// Read may list and get.
	Read
	// Admin may also change jobs and checkpoints.
	Admin
)

func (r Role) String() string {
	switch r {
	case None:
		return "none"
	case Read:
		return "read"
	case Admin:
		return "admin"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole parses a token file's role.
func ParseRole(s string) (Role, error) {
	switch s {
	case "read":
		return Read, nil
	case "admin":
		return Admin, nil
	}
	return None, fmt.Errorf("unknown role %q (want read or admin)", s)
}

// minTokenLen refuses tokens short enough to guess.
const minTokenLen = 16

// Tokens maps tokens to roles. The zero value and nil hold no token and
// refuse every request that needs a role; a server without a token file
// has no Tokens at all and checks nothing.
type Tokens struct {
	// byHash is keyed by the SHA-256 of a token: a lookup's time tells
	// nothing about how much of a wrong token matched, and no token is
	// kept in memory in the clear longer than parsing takes.
	byHash map[[sha256.Size]byte]Role
}

// Parse reads a token file's contents. Errors name the line but never
// the token.
func Parse(data []byte) (*Tokens, error) {
	t := &Tokens{byHash: map[[sha256.Size]byte]Role{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"<role> <token>\", got %d fields", n, len(fields))
		}
		role, err := ParseRole(fields[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(fields[1]) < minTokenLen {
			return nil, fmt.Errorf("line %d: token shorter than %d characters", n, minTokenLen)
		}
		h := sha256.Sum256([]byte(fields[1]))
		if _, dup := t.byHash[h]; dup {
			return nil, fmt.Errorf("line %d: token given twice", n)
		}
		t.byHash[h] = role
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(t.byHash) == 0 {
		return nil, errors.New("no token in it")
	}
	return t, nil
}

// Load reads the token file at path.
func Load(path string) (*Tokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: token file: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("auth: token file %s: %w", path, err)
	}
	return t, nil
}

// RoleOf returns the role token grants; ok is false for an unknown token.
func (t *Tokens) RoleOf(token string) (role Role, ok bool) {
	if t == nil || token == "" {
		return None, false
	}
	role, ok = t.byHash[sha256.Sum256([]byte(token))]
	return role, ok
}

// Decision is the outcome of a check.
type Decision int

const (
	// Allow serves the request.
	Allow Decision = iota
	// Unauthenticated: no token, or one the file does not hold (401).
	Unauthenticated
	// Forbidden: a token whose role is too low (403).
	Forbidden
)

// Check decides a request needing role need that carried token.
func (t *Tokens) Check(token string, need Role) Decision {
	if need == None {
		return Allow
	}
	role, ok := t.RoleOf(token)
	switch {
	case !ok:
		return Unauthenticated
	case role < need:
		return Forbidden
	}
	return Allow
}

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header value, "" for anything else.
func BearerToken(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
