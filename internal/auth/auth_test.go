package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	readToken  = "r-0123456789abcdef"
	adminToken = "a-0123456789abcdef"
)

func TestParse(t *testing.T) {
	tokens, err := Parse([]byte("# who may do what\n\nread " + readToken + "\n  admin\t" + adminToken + "  \n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		role  Role
		ok    bool
	}{
		{readToken, Read, true},
		{adminToken, Admin, true},
		{"", None, false},
		{"x" + readToken, None, false},
		{readToken[:len(readToken)-1], None, false},
	} {
		if role, ok := tokens.RoleOf(tc.token); role != tc.role || ok != tc.ok {
			t.Errorf("RoleOf(%q) = %v, %v; want %v, %v", tc.token, role, ok, tc.role, tc.ok)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"", "no token"},
		{"# only a comment\n", "no token"},
		{"read\n", "line 1: want \"<role> <token>\""},
		{"read a b c\n", "line 1: want"},
		{"\nwrite " + readToken + "\n", `line 2: unknown role "write"`},
		{"read short\n", "line 1: token shorter than 16"},
		{"read " + readToken + "\nadmin " + readToken + "\n", "line 2: token given twice"},
	} {
		_, err := Parse([]byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.file, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), readToken) {
			t.Errorf("Parse(%q): the error %q shows the token", tc.file, err)
		}
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "token file") {
		t.Fatalf("Load of a missing file = %v", err)
	}
	if err := os.WriteFile(path, []byte("admin "+adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if role, _ := tokens.RoleOf(adminToken); role != Admin {
		t.Fatalf("role = %v", role)
	}
}

func TestCheck(t *testing.T) {
	tokens, err := Parse([]byte("read " + readToken + "\nadmin " + adminToken + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		need  Role
		want  Decision
	}{
		{"", None, Allow},
		{"", Read, Unauthenticated},
		{"unknown-token-0123456789", Read, Unauthenticated},
		{readToken, Read, Allow},
		{readToken, Admin, Forbidden},
		{adminToken, Read, Allow},
		{adminToken, Admin, Allow},
	} {
		if got := tokens.Check(tc.token, tc.need); got != tc.want {
			t.Errorf("Check(%q, %v) = %v, want %v", tc.token, tc.need, got, tc.want)
		}
	}
	var none *Tokens
	if got := none.Check(adminToken, Read); got != Unauthenticated {
		t.Errorf("nil Tokens: Check = %v, want Unauthenticated", got)
	}
}

func TestBearerToken(t *testing.T) {
	for in, want := range map[string]string{
		"Bearer abc":   "abc",
		"bearer  abc ": "abc",
		"Basic abc":    "",
		"abc":          "",
		"":             "",
	} {
		if got := BearerToken(in); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", in, got, want)
		}
	}
}
