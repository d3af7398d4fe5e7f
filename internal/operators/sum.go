package operators

import (
	"fmt"
	"time"

	"github.com/weirproject/weir/sdk"
)

// KeyedSum keeps a running sum per key and emits (key, sum) for every input.
// Values are decimal integers.
type KeyedSum struct {
	sums sdk.ValueState
	// peek reads the sum without keeping it, which lets the heap backend
	// write the next sum over it instead of allocating.
	peek  func() ([]byte, bool)
	arena decimalArena
}

// peeker is a ValueState that can lend its value until the next Update.
type peeker interface{ Peek() ([]byte, bool) }

func (k *KeyedSum) Open(ctx sdk.Context) error {
	ttl, err := stateTTL(ctx.Config())
	if err != nil {
		return fmt.Errorf("keyed-sum: %w", err)
	}
	if ttl != nil {
		k.sums = ctx.ValueStateTTL("sum", *ttl)
	} else {
		k.sums = ctx.ValueState("sum")
	}
	k.peek = k.sums.Value
	if p, ok := k.sums.(peeker); ok {
		k.peek = p.Peek
	}
	return nil
}

func (k *KeyedSum) ProcessRecord(r sdk.Record, out sdk.Collector) error {
	v, err := parseInt(r.Value)
	if err != nil {
		return fmt.Errorf("keyed-sum: value of key %q: %w", r.Key, err)
	}
	var sum int64
	if b, ok := k.peek(); ok {
		if sum, err = parseInt(b); err != nil {
			return fmt.Errorf("keyed-sum: corrupt state of key %q: %w", r.Key, err)
		}
	}
	sum += v
	// The backend copies on Update (into the old sum's bytes where it
	// can); the record, which downstream holds for a while, takes the
	// arena's bytes.
	b := k.arena.appendInt(sum)
	k.sums.Update(b)
	out.Collect(sdk.Record{Key: r.Key, Value: b, Timestamp: r.Timestamp})
	return nil
}

func (k *KeyedSum) Close() error { return nil }

// stateTTL reads a built-in operator's state-ttl and state-ttl-update
// keys: nil when it keeps its state forever.
func stateTTL(cfg sdk.Config) (*sdk.StateTTL, error) {
	d, err := cfg.Duration("state-ttl", 0)
	if err != nil {
		return nil, err
	}
	update, err := cfg.String("state-ttl-update", "write")
	if err != nil {
		return nil, err
	}
	if d == 0 {
		return nil, nil
	}
	if d < time.Millisecond {
		return nil, fmt.Errorf("state-ttl %v: at least 1ms, or 0 for none", d)
	}
	switch update {
	case "write":
		return &sdk.StateTTL{TTL: d}, nil
	case "read-and-write":
		return &sdk.StateTTL{TTL: d, RefreshOnRead: true}, nil
	}
	return nil, fmt.Errorf("state-ttl-update %q: write or read-and-write", update)
}
