package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckWithin(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "checkpoints")
	outside := filepath.Join(base, "elsewhere")
	for _, d := range []string{filepath.Join(root, "savepoints", "savepoint-ab-1"), filepath.Join(outside, "savepoint-ab-2")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) string {
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
		return name
	}
	file, outsideFile := filepath.Join(root, "file"), filepath.Join(outside, "file")
	for _, f := range []string{file, outsideFile} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	escape := link(outside, filepath.Join(root, "escape"))
	inner := link(filepath.Join(root, "savepoints"), filepath.Join(root, "inner"))
	dangling := link(filepath.Join(outside, "not-yet"), filepath.Join(root, "dangling"))
	// The root itself named through a link: its resolved path counts.
	rootLink := link(root, filepath.Join(base, "root-link"))

	for _, tc := range []struct {
		name, loc string
		roots     []string
		ok        bool
	}{
		{"a savepoint in the root", filepath.Join(root, "savepoints", "savepoint-ab-1"), []string{root}, true},
		{"its _metadata", filepath.Join(root, "savepoints", "savepoint-ab-1", MetadataFile), []string{root}, true},
		{"the root itself", root, []string{root}, true},
		{"a new directory in the root", filepath.Join(root, "new", "deeper"), []string{root}, true},
		{"a file:// URL in the root", "file://" + filepath.Join(root, "savepoints"), []string{root}, true},
		{"the second root", filepath.Join(outside, "savepoint-ab-2"), []string{root, outside}, true},
		{"a link within the root", filepath.Join(inner, "savepoint-ab-1"), []string{root}, true},
		{"through a linked root", filepath.Join(rootLink, "savepoints"), []string{root}, true},
		{"below a file in the root", filepath.Join(file, "sub"), []string{root}, true},
		{"below a file outside", filepath.Join(outsideFile, "sub"), []string{root}, false},
		{"a root given as a link", filepath.Join(root, "savepoints"), []string{rootLink}, true},

		{"../ out of the root", root + "/../elsewhere/savepoint-ab-2", []string{root}, false},
		{"../ that stays inside", root + "/savepoints/../savepoints/savepoint-ab-1", []string{root}, false},
		{"an absolute path outside", filepath.Join(outside, "savepoint-ab-2"), []string{root}, false},
		{"/etc", "/etc", []string{root}, false},
		{"a sibling sharing the prefix", root + "-evil", []string{root}, false},
		{"a link escaping the root", filepath.Join(escape, "savepoint-ab-2"), []string{root}, false},
		{"a new directory behind an escaping link", filepath.Join(escape, "new"), []string{root}, false},
		{"a dangling link", filepath.Join(dangling, "x"), []string{root}, false},
		{"a local path with only S3 roots", filepath.Join(root, "x"), []string{"s3://bucket/ckpt"}, false},
		{"empty", "", []string{root}, false},

		{"S3 below the prefix", "s3://bucket/ckpt/savepoints/sp-1", []string{"s3://bucket/ckpt"}, true},
		{"S3 the prefix itself", "s3://bucket/ckpt/", []string{"s3://bucket/ckpt"}, true},
		{"S3 scheme in capitals", "S3://bucket/ckpt/sp", []string{"s3://bucket/ckpt"}, true},
		{"S3 a bucket root", "s3://bucket/anything", []string{"s3://bucket"}, true},
		{"S3 another bucket", "s3://other/ckpt/sp", []string{"s3://bucket/ckpt"}, false},
		{"S3 a bucket sharing the prefix", "s3://bucket-evil/ckpt", []string{"s3://bucket"}, false},
		{"S3 a prefix sharing the prefix", "s3://bucket/ckpt-evil/sp", []string{"s3://bucket/ckpt"}, false},
		{"S3 ../ out of the prefix", "s3://bucket/ckpt/../../other/sp", []string{"s3://bucket/ckpt"}, false},
		{"S3 with a local root", "s3://bucket/ckpt", []string{root}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckWithin(tc.loc, tc.roots...)
			if tc.ok && err != nil {
				t.Fatalf("CheckWithin(%s, %v): %v", tc.loc, tc.roots, err)
			}
			if !tc.ok {
				if err == nil {
					t.Fatalf("CheckWithin(%s, %v) accepted it", tc.loc, tc.roots)
				}
				if tc.loc != "" && !errors.Is(err, ErrOutsideRoots) && tc.name != "a dangling link" {
					t.Errorf("error %v is not ErrOutsideRoots", err)
				}
				t.Logf("%v", err)
			}
		})
	}
}

func TestIsRoot(t *testing.T) {
	root := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	for loc, want := range map[string]bool{
		root: true, root + "/": true, link: true, filepath.Join(root, "x"): false,
		"s3://b/p/": false,
	} {
		if got := IsRoot(loc, root, "s3://b/q"); got != want {
			t.Errorf("IsRoot(%s) = %v, want %v", loc, got, want)
		}
	}
	if !IsRoot("s3://b/q/", root, "s3://b/q") {
		t.Error("IsRoot(s3://b/q/) = false")
	}
}
