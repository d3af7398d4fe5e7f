// Package v1alpha1 holds the custom resources of the Weir operator, group
// weir.dev: WeirJob (a job and, unless it names a session cluster, the
// cluster that runs it) and WeirCluster (a session cluster that runs the
// jobs of several WeirJobs).
//
// +kubebuilder:object:generate=true
// +groupName=weir.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is the group and version of the resources.
var GroupVersion = schema.GroupVersion{Group: "weir.dev", Version: "v1alpha1"}

// SchemeBuilder adds the resources to a scheme.
var SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

// AddToScheme adds the resources to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme

func init() {
	SchemeBuilder.Register(&WeirJob{}, &WeirJobList{}, &WeirCluster{}, &WeirClusterList{})
}
