// Package floors measures what this machine can do at best, the baselines
// every benchmark is divided by: gRPC unary and stream round trips and
// one-way stream throughput between two processes on loopback, Go channel
// round trips, fsync latency and etcd transaction latency.
package floors

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/weirproject/weir/internal/exchange"
	weirv1 "github.com/weirproject/weir/proto/weir/v1"
	weirv1grpc "github.com/weirproject/weir/proto/weir/v1/weirv1grpc"
	"github.com/weirproject/weir/sdk"
)

// Stream modes, chosen by the client in SubscribePartition.subpartition.
const (
	modePingPong = 0
	modeFlood    = 1
)

// server is the far end of the gRPC floors. It speaks Weir's own data
// exchange protocol (DataExchangeService.Subscribe, ExchangeMessage), so
// the floors pay the same protobuf and HTTP/2 costs the runtime does.
type server struct {
	weirv1grpc.UnimplementedDataExchangeServiceServer
}

func (server) Subscribe(stream weirv1grpc.DataExchangeService_SubscribeServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	sub := first.GetSubscribe()
	switch sub.GetSubpartition() {
	case modePingPong:
		pong := &weirv1.ExchangeMessage{Kind: &weirv1.ExchangeMessage_Barrier{Barrier: &weirv1.CheckpointBarrier{CheckpointId: 1, TimestampMs: 1}}}
		for {
			if _, err := stream.Recv(); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			pong.GetBarrier().CheckpointId++
			if err := stream.Send(pong); err != nil {
				return err
			}
		}
	case modeFlood:
		n := int(sub.GetInitialCredit())
		recs := make([]sdk.Record, n)
		for i := range recs {
			k, v := make([]byte, 8), make([]byte, 8)
			binary.BigEndian.PutUint64(k, uint64(i))
			binary.BigEndian.PutUint64(v, uint64(i))
			recs[i] = sdk.Record{Key: k, Value: v}
		}
		// The runtime's own wire format, so the floor follows it.
		msg := exchange.Buffer{Kind: exchange.KindRecords, Records: recs}.ToProto()
		for stream.Context().Err() == nil {
			if err := stream.Send(msg); err != nil {
				return nil
			}
		}
		return nil
	}
	return fmt.Errorf("unknown mode %d", sub.GetSubpartition())
}

// Serve runs the floor server on addr until the process is killed.
func Serve(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	weirv1grpc.RegisterDataExchangeServiceServer(g, server{})
	return g.Serve(l)
}

// Client talks to a floor server.
type Client struct {
	conn *grpc.ClientConn
}

// Dial connects to the floor server at addr and waits until it answers.
func Dial(ctx context.Context, addr string) (*Client, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c := &Client{conn: conn}
	deadline := time.Now().Add(10 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			conn.Close()
			return nil, fmt.Errorf("floor server %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close closes the connection.
func (c *Client) Close() { c.conn.Close() }

// UnaryRTT times n unary calls (gRPC health Check), after a warm-up.
func (c *Client) UnaryRTT(ctx context.Context, n int) ([]time.Duration, error) {
	h := healthpb.NewHealthClient(c.conn)
	out := make([]time.Duration, 0, n)
	for i := -n / 10; i < n; i++ {
		start := time.Now()
		if _, err := h.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			return nil, err
		}
		if i >= 0 {
			out = append(out, time.Since(start))
		}
	}
	return out, nil
}

// StreamRTT times n ping-pongs on one bidirectional stream: a credit one
// way, a barrier message back.
func (c *Client) StreamRTT(ctx context.Context, n int) ([]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := weirv1grpc.NewDataExchangeServiceClient(c.conn).Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&weirv1.ExchangeRequest{Kind: &weirv1.ExchangeRequest_Subscribe{Subscribe: &weirv1.SubscribePartition{Subpartition: modePingPong}}}); err != nil {
		return nil, err
	}
	ping := &weirv1.ExchangeRequest{Kind: &weirv1.ExchangeRequest_Credit{Credit: 1}}
	out := make([]time.Duration, 0, n)
	for i := -n / 10; i < n; i++ {
		start := time.Now()
		if err := s.Send(ping); err != nil {
			return nil, err
		}
		if _, err := s.Recv(); err != nil {
			return nil, err
		}
		if i >= 0 {
			out = append(out, time.Since(start))
		}
	}
	_ = s.CloseSend()
	return out, nil
}

// Throughput is one window of one-way streaming.
type Throughput struct {
	Records, Messages, WireBytes int64
	Elapsed                      time.Duration
}

// StreamFlood receives batches of batch 16-byte records (8-byte key, 8-byte
// value) for d after a warm-up, decoding each into records as the runtime
// does.
func (c *Client) StreamFlood(ctx context.Context, batch int, warmup, d time.Duration, onStart func()) (Throughput, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := weirv1grpc.NewDataExchangeServiceClient(c.conn).Subscribe(ctx)
	if err != nil {
		return Throughput{}, err
	}
	if err := s.Send(&weirv1.ExchangeRequest{Kind: &weirv1.ExchangeRequest_Subscribe{Subscribe: &weirv1.SubscribePartition{Subpartition: modeFlood, InitialCredit: int32(batch)}}}); err != nil {
		return Throughput{}, err
	}
	var t Throughput
	var sink int
	start := time.Now()
	measuring := false
	for {
		m, err := s.Recv()
		if err != nil {
			return Throughput{}, err
		}
		now := time.Now()
		if !measuring && now.Sub(start) >= warmup {
			measuring, start = true, now
			if onStart != nil {
				onStart()
			}
		}
		if measuring {
			b, err := exchange.FromProto(m)
			if err != nil {
				return Throughput{}, err
			}
			recs := b.Records
			for _, r := range recs {
				sink += len(r.Key) + len(r.Value)
			}
			t.Records += int64(len(recs))
			t.Messages++
			t.WireBytes += int64(proto.Size(m))
			if t.Elapsed = now.Sub(start); t.Elapsed >= d {
				_ = sink
				return t, nil
			}
		}
	}
}

// ChannelRTT times n round trips between two goroutines over unbuffered
// Go channels: the in-process hop floor.
func ChannelRTT(n int) []time.Duration {
	ping, pong := make(chan int64), make(chan int64)
	go func() {
		for v := range ping {
			pong <- v
		}
		close(pong)
	}()
	out := make([]time.Duration, 0, n)
	for i := -n / 10; i < n; i++ {
		start := time.Now()
		ping <- int64(i)
		<-pong
		if i >= 0 {
			out = append(out, time.Since(start))
		}
	}
	close(ping)
	return out
}

// Fsync times n writes of size bytes to a new file in dir followed by
// fsync (what a durable checkpoint needs at least once).
func Fsync(dir string, n, size int) ([]time.Duration, error) {
	data := make([]byte, size)
	out := make([]time.Duration, 0, n)
	for i := -n / 10; i < n; i++ {
		path := filepath.Join(dir, "fsync-"+strconv.Itoa(i))
		start := time.Now()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		if i >= 0 {
			out = append(out, time.Since(start))
		}
		os.Remove(path)
	}
	return out, nil
}

// ServeEtcd runs a single-member etcd (fsync on, the defaults) with its
// data in dir, listening for clients on addr (which also serves /metrics),
// until the process is killed.
func ServeEtcd(dir, addr string) error {
	cfg := embed.NewConfig()
	cfg.Name = "weir-bench"
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cu := url.URL{Scheme: "http", Host: addr}
	pu := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("etcd not ready")
	}
	fmt.Println("etcd ready")
	return <-e.Err()
}

// EtcdTxn times n compare-and-swap transactions on one key, the shape of
// Weir's fenced writes (If(compare) Then(put) Else(get)).
func EtcdTxn(ctx context.Context, endpoint string, n int) ([]time.Duration, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	key := "/bench/floor"
	if _, err := c.Put(ctx, key, "0"); err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, n)
	for i := -n / 10; i < n; i++ {
		start := time.Now()
		prev := strconv.Itoa(i + n/10)
		r, err := c.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", prev)).
			Then(clientv3.OpPut(key, strconv.Itoa(i+n/10+1))).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return nil, err
		}
		if !r.Succeeded {
			return nil, fmt.Errorf("etcd floor: compare failed at %d", i)
		}
		if i >= 0 {
			out = append(out, time.Since(start))
		}
	}
	return out, nil
}
