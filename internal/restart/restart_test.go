package restart

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirproject/weir/proto/weir/v1"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

type step struct {
	at    time.Duration // failure time since t0
	delay time.Duration
	ok    bool
}

func TestStrategies(t *testing.T) {
	d := durationpb.New
	cases := map[string]struct {
		spec  *weirv1.RestartStrategy
		steps []step
	}{
		"none never restarts": {
			spec:  &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_NONE},
			steps: []step{{0, 0, false}},
		},
		"fixed-delay gives attempts restarts then fails": {
			spec:  &weirv1.RestartStrategy{Kind: weirv1.RestartStrategy_KIND_FIXED_DELAY, Attempts: 2, Delay: d(time.Second)},
			steps: []step{{0, time.Second, true}, {time.Hour, time.Second, true}, {2 * time.Hour, 0, false}},
		},
		"exponential-delay grows, caps and resets after a healthy period": {
			spec: &weirv1.RestartStrategy{
				Kind: weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY, Attempts: 10,
				InitialBackoff: d(time.Second), MaxBackoff: d(5 * time.Second), Multiplier: 2,
				ResetBackoffThreshold: d(time.Minute),
			},
			steps: []step{
				{0, time.Second, true},
				{2 * time.Second, 2 * time.Second, true},
				{5 * time.Second, 4 * time.Second, true},
				{10 * time.Second, 5 * time.Second, true},
				{16 * time.Second, 5 * time.Second, true},
				// healthy for longer than reset (+ the last backoff): start over
				{16*time.Second + 5*time.Second + time.Minute, time.Second, true},
			},
		},
		"exponential-delay with attempts fails when they run out before a reset": {
			spec: &weirv1.RestartStrategy{
				Kind: weirv1.RestartStrategy_KIND_EXPONENTIAL_DELAY, Attempts: 2,
				InitialBackoff: d(time.Second), MaxBackoff: d(time.Minute), Multiplier: 3,
				ResetBackoffThreshold: d(time.Hour),
			},
			steps: []step{{0, time.Second, true}, {2 * time.Second, 3 * time.Second, true}, {6 * time.Second, 0, false}},
		},
	}
	for name, c := range cases {
		// Failover: after every failure a new leader rebuilds the strategy
		// from the stored budget (through JSON, as etcd holds it); the
		// decisions must be those of one strategy living throughout.
		for _, failover := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/failover=%t", name, failover), func(t *testing.T) {
				s := New(c.spec, Budget{})
				for i, st := range c.steps {
					delay, ok := s.Failure(t0.Add(st.at))
					if delay != st.delay || ok != st.ok {
						t.Fatalf("failure %d at +%v: got (%v, %t), want (%v, %t); %s", i, st.at, delay, ok, st.delay, st.ok, s.Describe())
					}
					if failover {
						b, err := json.Marshal(s.Budget())
						if err != nil {
							t.Fatal(err)
						}
						var stored Budget
						if err := json.Unmarshal(b, &stored); err != nil {
							t.Fatal(err)
						}
						s = New(c.spec, stored)
					}
				}
			})
		}
	}
}
