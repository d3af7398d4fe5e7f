package harness

import "testing"

func TestGenerateCerts(t *testing.T) {
	dir := t.TempDir()
	if err := GenerateCerts(dir, 2); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{JobManagerCertName, "tm-0", "tm-1"} {
		if _, err := tlsFlags(dir, name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A TaskManager beyond those issued must fail in the harness, not as
	// a daemon that does not start.
	if _, err := tlsFlags(dir, "tm-2"); err == nil {
		t.Error("tm-2: no error without its certificate")
	}
	if _, _, err := clientTLS(dir); err != nil {
		t.Errorf("client: %v", err)
	}
	// Once per run, but a work directory reused must not stop it.
	if err := GenerateCerts(dir, 2); err != nil {
		t.Errorf("again: %v", err)
	}
}
