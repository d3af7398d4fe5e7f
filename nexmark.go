package weir

import (
	"fmt"

	"github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/sdk"
)

// The Nexmark benchmark's events (an online auction house: people,
// auctions and bids), as the built-in nexmark-source generates them.
type (
	// NexmarkEvent is one event: Kind says which of Person, Auction and
	// Bid is set.
	NexmarkEvent = nexmark.Event
	// NexmarkPerson is a new user of the auction house.
	NexmarkPerson = nexmark.Person
	// NexmarkAuction is an item put up for auction by a person (Seller).
	NexmarkAuction = nexmark.Auction
	// NexmarkBid is a person's (Bidder) bid on an auction.
	NexmarkBid = nexmark.Bid
)

// The kinds of a NexmarkEvent.
const (
	NexmarkPersonKind  = nexmark.KindPerson
	NexmarkAuctionKind = nexmark.KindAuction
	NexmarkBidKind     = nexmark.KindBid
)

// NexmarkSource generates the Nexmark event stream with the built-in
// nexmark-source: event n is a pure function of n and the generator
// settings (so a run's events are reproducible), people, auctions and
// bids in the proportions 1 : 3 : 46, each event at its event time. config
// is nexmark-source's configuration, as in a job spec: events (0:
// unbounded), rate (events/s of the whole stream, 0: as fast as
// possible), first-event-rate (events/s of event time), splits,
// base-time, hot-auction-ratio, hot-bidder-ratio, hot-seller-ratio. Each
// split's position is in every checkpoint, and each split is a split of
// the watermark.
func NexmarkSource(config map[string]any) Source[NexmarkEvent] {
	return nexmarkSource{config: config}
}

type nexmarkSource struct{ config map[string]any }

func (n nexmarkSource) source(out *output[NexmarkEvent]) (string, map[string]any, func() sdk.Source) {
	cfg := withConnector(n.config, "nexmark-source")
	// Records of a typed stream carry the key KeyBy gives them, not the
	// event kind.
	cfg["key"] = "none"
	return "nexmark-source()", cfg, func() sdk.Source {
		e := &emitter[NexmarkEvent]{out: out}
		return &nexmark.Source{Make: func(ev NexmarkEvent) sdk.Record { return e.record(ev, ev.DateTime()) }}
	}
}

func init() {
	RegisterCodec[NexmarkEvent](nexmarkEventCodec{})
	RegisterCodec[NexmarkBid](nexmarkBidCodec{})
	RegisterCodec[NexmarkAuction](nexmarkAuctionCodec{})
	RegisterCodec[NexmarkPerson](nexmarkPersonCodec{})
}

// The codecs of the Nexmark types are the generator's own binary encoding
// (a kind byte, varints and length-prefixed strings): no reflection, and
// a decoded event's strings share one allocation.
type nexmarkEventCodec struct{}

func (nexmarkEventCodec) Append(dst []byte, e NexmarkEvent) []byte {
	return nexmark.AppendEncode(dst, e)
}
func (nexmarkEventCodec) Decode(b []byte) (NexmarkEvent, error) { return nexmark.Decode(b) }

type nexmarkBidCodec struct{}

func (nexmarkBidCodec) Append(dst []byte, b NexmarkBid) []byte {
	return nexmark.AppendEncode(dst, NexmarkEvent{Kind: nexmark.KindBid, Bid: &b})
}

func (nexmarkBidCodec) Decode(b []byte) (NexmarkBid, error) {
	e, err := decodeKind(b, nexmark.KindBid)
	if err != nil {
		return NexmarkBid{}, err
	}
	return *e.Bid, nil
}

type nexmarkAuctionCodec struct{}

func (nexmarkAuctionCodec) Append(dst []byte, a NexmarkAuction) []byte {
	return nexmark.AppendEncode(dst, NexmarkEvent{Kind: nexmark.KindAuction, Auction: &a})
}

func (nexmarkAuctionCodec) Decode(b []byte) (NexmarkAuction, error) {
	e, err := decodeKind(b, nexmark.KindAuction)
	if err != nil {
		return NexmarkAuction{}, err
	}
	return *e.Auction, nil
}

type nexmarkPersonCodec struct{}

func (nexmarkPersonCodec) Append(dst []byte, p NexmarkPerson) []byte {
	return nexmark.AppendEncode(dst, NexmarkEvent{Kind: nexmark.KindPerson, Person: &p})
}

func (nexmarkPersonCodec) Decode(b []byte) (NexmarkPerson, error) {
	e, err := decodeKind(b, nexmark.KindPerson)
	if err != nil {
		return NexmarkPerson{}, err
	}
	return *e.Person, nil
}

func decodeKind(b []byte, k nexmark.Kind) (NexmarkEvent, error) {
	e, err := nexmark.Decode(b)
	if err == nil && e.Kind != k {
		err = fmt.Errorf("weir: decode a Nexmark %v: got a %v", k, e.Kind)
	}
	return e, err
}
