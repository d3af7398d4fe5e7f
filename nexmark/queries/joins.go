package queries

import (
	"github.com/weirproject/weir"
	"github.com/weirproject/weir/nexmark"
)

// q3Join is q3's incremental join of people and auctions on the seller,
// as Flink's regular join keeps it: a person is kept once registered, and
// an auction that comes before its seller waits for them. Every auction
// is joined once, however the two streams interleave.
type q3Join struct {
	person  *weir.ValueState[seller]
	pending *weir.ListState[int64] // auctions that came before their seller
}

type seller struct{ Name, City, State string }

func newQ3Join() weir.KeyedProcessFunction[int64, nexmark.Event, Suggestion] {
	return &q3Join{person: weir.NewValueState[seller]("person"), pending: weir.NewListState[int64]("pending")}
}

func (f *q3Join) ProcessElement(ctx *weir.Context[int64, Suggestion], e nexmark.Event) error {
	if p := e.Person; p != nil {
		s := seller{Name: p.Name, City: p.City, State: p.State}
		f.person.Update(ctx, s)
		for _, a := range f.pending.Get(ctx) {
			ctx.Emit(s.suggest(a))
		}
		f.pending.Clear(ctx)
		return nil
	}
	if s, ok := f.person.Value(ctx); ok {
		ctx.Emit(s.suggest(e.Auction.ID))
		return nil
	}
	f.pending.Add(ctx, e.Auction.ID)
	return nil
}

func (s seller) suggest(auction int64) Suggestion {
	return Suggestion{Name: s.Name, City: s.City, State: s.State, Auction: auction}
}

// winningBids finds each auction's winning bid (q4's inner query): the
// highest bid whose time is within the auction's [start, expiry], emitted
// at the expiry once the watermark passed it. A bid can come before its
// auction (another split may be behind); it waits until its auction comes
// or until the watermark passes its time, after which no auction it could
// be valid for can come (an auction starting after the bid).
//
// A closed auction stays as a tombstone for closedFor of event time: hot
// auctions keep getting bids after they expire, and without it each would
// wait as an early bid.
type winningBids struct {
	auction *weir.ValueState[openAuction]
	best    *weir.ValueState[int64]
	early   *weir.ListState[earlyBid]
}

// closedFor is how long a closed auction's tombstone stays. Only speed
// depends on it: a bid for an auction closed longer ago waits as an early
// bid until the watermark passes it.
const closedFor = 10_000

type openAuction struct {
	Start, Expires, Category int64
	Closed                   bool
}

type earlyBid struct{ Price, DateTime int64 }

func (a openAuction) valid(dateTime int64) bool { return a.Start <= dateTime && dateTime <= a.Expires }

func newWinningBids() weir.KeyedProcessFunction[int64, nexmark.Event, Winner] {
	return &winningBids{
		auction: weir.NewValueState[openAuction]("auction"),
		best:    weir.NewValueState[int64]("best"),
		early:   weir.NewListState[earlyBid]("early"),
	}
}

func (f *winningBids) ProcessElement(ctx *weir.Context[int64, Winner], e nexmark.Event) error {
	if a := e.Auction; a != nil {
		open := openAuction{Start: a.DateTime, Expires: a.Expires, Category: a.Category}
		f.auction.Update(ctx, open)
		best := int64(-1)
		for _, b := range f.early.Get(ctx) {
			if open.valid(b.DateTime) {
				best = max(best, b.Price)
			}
		}
		f.early.Clear(ctx)
		if best >= 0 {
			f.best.Update(ctx, best)
		}
		ctx.RegisterEventTimeTimer(weir.Time(a.Expires))
		return nil
	}
	b := e.Bid
	if open, ok := f.auction.Value(ctx); ok {
		if !open.Closed && open.valid(b.DateTime) {
			if cur, ok := f.best.Value(ctx); !ok || b.Price > cur {
				f.best.Update(ctx, b.Price)
			}
		}
		return nil
	}
	f.early.Add(ctx, earlyBid{Price: b.Price, DateTime: b.DateTime})
	ctx.RegisterEventTimeTimer(weir.Time(b.DateTime))
	return nil
}

func (f *winningBids) OnTimer(ctx *weir.Context[int64, Winner], t weir.Timer) error {
	if open, ok := f.auction.Value(ctx); ok {
		switch {
		case open.Closed && int64(t.Timestamp) >= open.Expires+closedFor:
			f.auction.Clear(ctx)
		case open.Closed || int64(t.Timestamp) < open.Expires:
			// An early bid's timer, from before the auction came.
		default:
			if best, ok := f.best.Value(ctx); ok {
				ctx.EmitAt(Winner{Auction: ctx.Key(), Category: open.Category, Price: best}, weir.Time(open.Expires))
			}
			f.best.Clear(ctx)
			open.Closed = true
			f.auction.Update(ctx, open)
			ctx.RegisterEventTimeTimer(weir.Time(open.Expires + closedFor))
		}
		return nil
	}
	// No auction came by the watermark: early bids at or before it never
	// will be valid for one.
	var keep []earlyBid
	for _, b := range f.early.Get(ctx) {
		if b.DateTime > int64(t.Timestamp) {
			keep = append(keep, b)
		}
	}
	if len(keep) == 0 {
		f.early.Clear(ctx)
	} else {
		f.early.Update(ctx, keep)
	}
	return nil
}
