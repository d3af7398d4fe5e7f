package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirproject/weir/internal/daemon"
	"github.com/weirproject/weir/internal/ha"
	"github.com/weirproject/weir/internal/kubeha"
	"github.com/weirproject/weir/internal/tlsconfig"
)

// leaderAddress asks etcd which JobManager leads the cluster.
func leaderAddress(endpoints, clusterID string, timeout time.Duration, etcdTLS tlsconfig.Files) (string, error) {
	client, err := daemon.EtcdClient(endpoints, etcdTLS, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", err
	}
	defer client.Close()
	keys, err := ha.NewKeys(clusterID)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	info, ok, err := ha.CurrentLeader(ctx, client, keys.Leader())
	if err != nil {
		return "", fmt.Errorf("find the JobManager leader in etcd %s: %w", endpoints, err)
	}
	if !ok {
		return "", fmt.Errorf("no JobManager leads cluster %q in etcd %s", clusterID, endpoints)
	}
	return info.RPCAddr, nil
}

// kubeLeaderAddress asks the Kubernetes API server which JobManager holds
// the cluster's Lease.
func kubeLeaderAddress(kube daemon.Kube, clusterID string, timeout time.Duration) (string, error) {
	client, ns, err := kube.Client()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	info, ok, err := kubeha.CurrentLeader(ctx, kubeha.Config{Client: client, Namespace: ns, ClusterID: clusterID})
	if err != nil {
		return "", fmt.Errorf("find the JobManager leader on Kubernetes: %w", err)
	}
	if !ok {
		return "", fmt.Errorf("no JobManager leads cluster %q in namespace %s", clusterID, ns)
	}
	return info.RPCAddr, nil
}
