// Package nexmark is the Nexmark benchmark's event stream for a Go job:
// an online auction house's people, auctions and bids, as the built-in
// nexmark-source generates them (event n is a pure function of n and the
// settings, so a run's events are reproducible), and their codecs.
package nexmark

import (
	"fmt"
	"time"

	"github.com/weirproject/weir"
	gen "github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/sdk"
)

type (
	// Event is one event: Kind says which of Person, Auction and Bid is
	// set.
	Event = gen.Event
	// Person is a new user of the auction house.
	Person = gen.Person
	// Auction is an item put up for auction by a person (Seller).
	Auction = gen.Auction
	// Bid is a person's (Bidder) bid on an auction.
	Bid = gen.Bid
)

// The kinds of an Event.
const (
	PersonKind  = gen.KindPerson
	AuctionKind = gen.KindAuction
	BidKind     = gen.KindBid
)

// Config configures a Source (nexmark-source's keys); zero fields take
// the generator's defaults.
type Config struct {
	// Events is how many events the stream has (0: unbounded).
	Events int64
	// Rate is events per second of the whole stream (0: as fast as it
	// can).
	Rate float64
	// FirstEventRate is events per second of event time.
	FirstEventRate float64
	// Splits is how many splits the stream is cut into (0: one per
	// subtask).
	Splits int
	// BaseTime is the first event's event time.
	BaseTime time.Time
	// The ratios of hot auctions, bidders and sellers (Nexmark's).
	HotAuctionRatio, HotBidderRatio, HotSellerRatio int
}

func (c Config) config() map[string]any {
	// Records of a typed stream carry the key KeyBy gives them, not the
	// event kind.
	m := map[string]any{weir.ConnectorKey: "nexmark-source", "key": "none"}
	set := func(key string, v float64) {
		if v != 0 {
			m[key] = v
		}
	}
	set("events", float64(c.Events))
	set("rate", c.Rate)
	set("first-event-rate", c.FirstEventRate)
	set("splits", float64(c.Splits))
	set("hot-auction-ratio", float64(c.HotAuctionRatio))
	set("hot-bidder-ratio", float64(c.HotBidderRatio))
	set("hot-seller-ratio", float64(c.HotSellerRatio))
	if !c.BaseTime.IsZero() {
		m["base-time"] = c.BaseTime.Format(time.RFC3339Nano)
	}
	return m
}

// Source generates the Nexmark event stream: people, auctions and bids in
// the proportions 1 : 3 : 46, each at its event time. Each split's
// position is in every checkpoint, and each split is a split of the
// watermark.
func Source(cfg Config) weir.Source[Event] { return source{cfg} }

type source struct{ cfg Config }

func (s source) SourceVertex(records weir.Records[Event]) weir.SourceVertex {
	return weir.SourceVertex{Signature: "nexmark-source()", Config: s.cfg.config(), New: func() sdk.Source {
		e := records.Encoder()
		return &gen.Source{Make: func(ev Event) sdk.Record { return e.Record(ev, weir.Time(ev.DateTime())) }}
	}}
}

// Codecs travel with the source: a job that reads it encodes events,
// bids, auctions and people with the generator's own encoding.
func (source) Codecs() []weir.JobOption { return Codecs() }

// Codecs gives a job the codecs of the Nexmark types, for a job that
// reads them from elsewhere than Source (NewJob(name, Codecs()...)).
func Codecs() []weir.JobOption {
	return []weir.JobOption{
		weir.WithCodec[Event](eventCodec{}),
		weir.WithCodec[Bid](bidCodec{}),
		weir.WithCodec[Auction](auctionCodec{}),
		weir.WithCodec[Person](personCodec{}),
	}
}

// The codecs of the Nexmark types are the generator's own binary encoding
// (a kind byte, varints and length-prefixed strings): no reflection, and
// a decoded event's strings share one allocation.
type eventCodec struct{}

func (eventCodec) Append(dst []byte, e Event) []byte {
	return gen.AppendEncode(dst, e)
}
func (eventCodec) Decode(b []byte) (Event, error) { return gen.Decode(b) }

type bidCodec struct{}

func (bidCodec) Append(dst []byte, b Bid) []byte {
	return gen.AppendEncode(dst, Event{Kind: gen.KindBid, Bid: &b})
}

func (bidCodec) Decode(b []byte) (Bid, error) {
	e, err := decodeKind(b, gen.KindBid)
	if err != nil {
		return Bid{}, err
	}
	return *e.Bid, nil
}

type auctionCodec struct{}

func (auctionCodec) Append(dst []byte, a Auction) []byte {
	return gen.AppendEncode(dst, Event{Kind: gen.KindAuction, Auction: &a})
}

func (auctionCodec) Decode(b []byte) (Auction, error) {
	e, err := decodeKind(b, gen.KindAuction)
	if err != nil {
		return Auction{}, err
	}
	return *e.Auction, nil
}

type personCodec struct{}

func (personCodec) Append(dst []byte, p Person) []byte {
	return gen.AppendEncode(dst, Event{Kind: gen.KindPerson, Person: &p})
}

func (personCodec) Decode(b []byte) (Person, error) {
	e, err := decodeKind(b, gen.KindPerson)
	if err != nil {
		return Person{}, err
	}
	return *e.Person, nil
}

func decodeKind(b []byte, k gen.Kind) (Event, error) {
	e, err := gen.Decode(b)
	if err == nil && e.Kind != k {
		err = fmt.Errorf("weir: decode a Nexmark %v: got a %v", k, e.Kind)
	}
	return e, err
}
