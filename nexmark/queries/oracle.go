package queries

import (
	"fmt"

	gen "github.com/weirproject/weir/internal/nexmark"
	"github.com/weirproject/weir/nexmark"
)

// Oracle computes query q over events 0 … events−1 of the stream cfg
// describes, in plain Go, in one pass over all of them (a batch, with no
// checkpoints, watermarks or parallelism): the lines a correct run's file
// sink commits, in no particular order.
func Oracle(q string, cfg gen.Config, events int64) ([]string, error) {
	var o oracle
	switch q {
	case "q0", "q1", "q2":
	case "q3", "q4", "q5", "q7", "q8":
		o.init()
	default:
		return nil, fmt.Errorf("nexmark: unknown query %q (have %v)", q, Names)
	}
	for n := range events {
		e := gen.Generate(cfg, n)
		switch q {
		case "q0":
			Q0(e, func(b nexmark.Bid) { o.lines = append(o.lines, BidLine(b)) })
		case "q1":
			Q1(e, func(b EuroBid) { o.lines = append(o.lines, b.Line()) })
		case "q2":
			Q2(e, func(a AuctionPrice) { o.lines = append(o.lines, a.Line()) })
		default:
			o.add(e)
		}
	}
	switch q {
	case "q3":
		o.q3()
	case "q4":
		o.q4()
	case "q5":
		o.q5()
	case "q7":
		o.q7()
	case "q8":
		o.q8()
	}
	return o.lines, nil
}

type oracle struct {
	lines    []string
	people   map[int64]*nexmark.Person
	auctions []*nexmark.Auction
	bids     []*nexmark.Bid
}

func (o *oracle) init() { o.people = map[int64]*nexmark.Person{} }

func (o *oracle) add(e nexmark.Event) {
	switch {
	case e.Person != nil:
		o.people[e.Person.ID] = e.Person
	case e.Auction != nil:
		o.auctions = append(o.auctions, e.Auction)
	case e.Bid != nil:
		o.bids = append(o.bids, e.Bid)
	}
}

// windowStarts are the starts of the windows of size, sliding by slide
// (tumbling when equal) and aligned to the epoch, that hold ts.
func windowStarts(ts int64, size, slide int64) []int64 {
	var starts []int64
	for s := ts - ts%slide; s > ts-size; s -= slide {
		starts = append(starts, s)
	}
	return starts
}

func (o *oracle) q3() {
	for _, a := range o.auctions {
		if p := o.people[a.Seller]; q3Auction(a) && q3Person(p) {
			o.lines = append(o.lines, Suggestion{Name: p.Name, City: p.City, State: p.State, Auction: a.ID}.Line())
		}
	}
}

func (o *oracle) q4() {
	best := map[int64]int64{}
	byID := map[int64]*nexmark.Auction{}
	for _, a := range o.auctions {
		byID[a.ID] = a
	}
	for _, b := range o.bids {
		a := byID[b.Auction]
		if a == nil || b.DateTime < a.DateTime || b.DateTime > a.Expires {
			continue
		}
		if cur, ok := best[a.ID]; !ok || b.Price > cur {
			best[a.ID] = b.Price
		}
	}
	type cell struct{ category, start int64 }
	sums := map[cell]sumCount{}
	for _, a := range o.auctions {
		price, ok := best[a.ID]
		if !ok {
			continue
		}
		for _, s := range windowStarts(a.Expires, q4Size.Milliseconds(), q4Slide.Milliseconds()) {
			c := sums[cell{a.Category, s}]
			sums[cell{a.Category, s}] = sumCount{c.Sum + price, c.Count + 1}
		}
	}
	for c, v := range sums {
		o.lines = append(o.lines, CategoryPrice{Category: c.category, Start: c.start, End: c.start + q4Size.Milliseconds(), Sum: v.Sum, Count: v.Count}.Line())
	}
}

func (o *oracle) q5() {
	size, slide := q5Size.Milliseconds(), q5Slide.Milliseconds()
	counts := map[int64]map[int64]int64{} // window start → auction → bids
	for _, b := range o.bids {
		for _, s := range windowStarts(b.DateTime, size, slide) {
			if counts[s] == nil {
				counts[s] = map[int64]int64{}
			}
			counts[s][b.Auction]++
		}
	}
	for s, byAuction := range counts {
		var top int64
		for _, n := range byAuction {
			top = max(top, n)
		}
		for a, n := range byAuction {
			if n == top {
				o.lines = append(o.lines, HotItem{Start: s, End: s + size, Auction: a, Bids: n}.Line())
			}
		}
	}
}

func (o *oracle) q7() {
	size := q7Size.Milliseconds()
	top := map[int64]int64{}
	for _, b := range o.bids {
		s := b.DateTime - b.DateTime%size
		if cur, ok := top[s]; !ok || b.Price > cur {
			top[s] = b.Price
		}
	}
	for _, b := range o.bids {
		if b.Price == top[b.DateTime-b.DateTime%size] {
			o.lines = append(o.lines, BidLine(*b))
		}
	}
}

func (o *oracle) q8() {
	size := q8Size.Milliseconds()
	type cell struct{ person, start int64 }
	sold := map[cell]bool{}
	for _, a := range o.auctions {
		sold[cell{a.Seller, a.DateTime - a.DateTime%size}] = true
	}
	for _, p := range o.people {
		if s := p.DateTime - p.DateTime%size; sold[cell{p.ID, s}] {
			o.lines = append(o.lines, NewUser{ID: p.ID, Name: p.Name, Start: s}.Line())
		}
	}
}
