package nexmark

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestEncodeRoundTrip(t *testing.T) {
	events := []Event{
		{Kind: KindPerson, Person: &Person{}},
		{Kind: KindAuction, Auction: &Auction{}},
		{Kind: KindBid, Bid: &Bid{}},
		{Kind: KindAuction, Auction: &Auction{ID: math.MinInt64, DateTime: math.MaxInt64, Expires: math.MinInt64, Reserve: -1, ItemName: "é\x00"}},
		{Kind: KindBid, Bid: &Bid{Auction: math.MaxInt64, Bidder: math.MinInt64, Price: -5, URL: string(make([]byte, 300))}},
	}
	for n := range int64(5000) {
		events = append(events, Generate(Config{}, n*7919))
	}
	for _, e := range events {
		b := Encode(e)
		if len(b) != EncodedSize(e) {
			t.Fatalf("%v: EncodedSize %d, encoding %d bytes", e.Kind, EncodedSize(e), len(b))
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("decode %v: %v", e.Kind, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip: %+v, want %+v", got, e)
		}
		// Every strict prefix and any trailing byte is corrupt.
		for i := range len(b) {
			if _, err := Decode(b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v: prefix of %d of %d bytes: %v", e.Kind, i, len(b), err)
			}
		}
		if _, err := Decode(append(b, 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v: trailing byte: %v", e.Kind, err)
		}
	}
	// A bid is compact: its fields plus a few bytes of framing.
	e := Generate(Config{}, 10)
	if b := Encode(e); len(b) > BidBaseSize+len(e.Bid.Extra)+len(e.Bid.Channel)+len(e.Bid.URL)+8 {
		t.Errorf("bid encodes to %d bytes", len(b))
	}
}

func TestDecodeCorrupt(t *testing.T) {
	for _, b := range [][]byte{
		nil, {0}, {4}, {1}, {3, 0x80}, {1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		{2, 0, 10, 'a'}, // string longer than the input
	} {
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Decode(%x) = %v, want ErrCorrupt", b, err)
		}
	}
}

func TestEncodePanicsOnMissingBody(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	Encode(Event{Kind: KindBid})
}

// FuzzDecode: Decode never panics, and what it accepts re-encodes to an
// encoding that decodes to the same event.
func FuzzDecode(f *testing.F) {
	for _, n := range []int64{0, 1, 2, 3, 4, 49, 50, 123456} {
		f.Add(Encode(Generate(Config{}, n)))
	}
	f.Add([]byte{})
	f.Add([]byte{3, 0x80})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		// The decoder's varints are encoding/binary's.
		u, n := uvarint(string(b))
		if wu, wn := binary.Uvarint(b); u != wu || n != wn {
			t.Fatalf("uvarint(%x) = %d, %d; encoding/binary says %d, %d", b, u, n, wu, wn)
		}
		e, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again, err := Decode(Encode(e))
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("re-encoding %+v: %+v, %v", e, again, err)
		}
	})
}
