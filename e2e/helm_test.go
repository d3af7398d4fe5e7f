package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/weirproject/weir/internal/jobgraph"
	"github.com/weirproject/weir/internal/kubetest"
	"github.com/weirproject/weir/operator/api/v1alpha1"
	"sigs.k8s.io/yaml"
)

// The plain manifests are the charts rendered with these arguments
// (make kube-manifests).
var plainManifests = []struct {
	chart, file string
	args        []string
}{
	{"weir-operator", "weir-operator.yaml", []string{"--include-crds"}},
	{"weir-cluster", "weir-cluster.yaml", []string{"--set", "tls.createSecret=false"}},
}

func helmBinary(t *testing.T) string {
	t.Helper()
	helm := os.Getenv("WEIR_HELM")
	if helm == "" {
		t.Skip("WEIR_HELM is not set: `make helm` builds helm, and `make test` sets it")
	}
	return helm
}

func runHelm(t *testing.T, helm string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// TestHelmChartsOnTheAPIServer lints both charts, checks that the plain
// manifests are the charts as rendered now, and applies every object the
// charts render, and the examples, to a real API server with server-side
// dry-run: each is validated by the server (schemas, the CRDs' OpenAPI
// validation of the examples) without being stored.
func TestHelmChartsOnTheAPIServer(t *testing.T) {
	t.Parallel()
	helm := helmBinary(t)
	api := kubetest.Shared(t)
	api.InstallCRDs(t, filepath.Join("..", "deploy", "kubernetes", "crds"))
	ns := api.Namespace(t)
	for _, m := range plainManifests {
		chart := filepath.Join("..", "deploy", "helm", m.chart)
		runHelm(t, helm, "lint", "--strict", chart)
		rendered := runHelm(t, helm, append([]string{"template", "weir", chart, "--namespace", "weir"}, m.args...)...)
		committed, err := os.ReadFile(filepath.Join("..", "deploy", "kubernetes", "manifests", m.file))
		if err != nil || !bytes.Equal(rendered, committed) {
			t.Errorf("deploy/kubernetes/manifests/%s is not the chart %s as rendered now (%v): run make kube-manifests", m.file, m.chart, err)
		}
		dryRunApply(t, api, ns, runHelm(t, helm, "template", "weir", chart, "--namespace", ns))
	}
	for _, f := range []string{"weirjob.yaml", "weircluster.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "kubernetes", "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		dryRunApply(t, api, ns, b)
		checkExampleJobs(t, b)
	}
}

// checkExampleJobs parses the job specs of the examples' WeirJobs.
func checkExampleJobs(t *testing.T, docs []byte) {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(docs), 4096)
	for {
		var wj v1alpha1.WeirJob
		err := dec.Decode(&wj)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if wj.Kind != "WeirJob" {
			continue
		}
		g, err := jobgraph.ParseSpec([]byte(wj.Spec.Job.Spec))
		if err == nil {
			err = jobgraph.Validate(g)
		}
		if err != nil {
			t.Errorf("example WeirJob %s: %v", wj.Name, err)
		}
	}
}

// dryRunApply applies every object of the YAML stream docs in namespace
// ns with server-side apply and dry-run.
func dryRunApply(t *testing.T, api *kubetest.APIServer, ns string, docs []byte) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(docs), 4096)
	n := 0
	for {
		var raw map[string]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if raw == nil {
			continue
		}
		obj := &unstructured.Unstructured{Object: raw}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s %s: %v", gvk.Kind, obj.GetName(), err)
			continue
		}
		r := dyn.Resource(mapping.Resource)
		var ri dynamic.ResourceInterface = r
		if mapping.Scope.Name() == "namespace" {
			obj.SetNamespace(ns)
			ri = r.Namespace(ns)
		}
		if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "weir-test", DryRun: []string{metav1.DryRunAll}, Force: true}); err != nil {
			b, _ := yaml.Marshal(obj.Object)
			t.Errorf("server-side dry-run of %s %s refused: %v\n%s", gvk.Kind, obj.GetName(), err, b)
		}
		n++
	}
	if n == 0 {
		t.Error("no objects rendered")
	}
}
