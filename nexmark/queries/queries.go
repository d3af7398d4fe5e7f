// Package queries is the Nexmark benchmark's queries written with Weir's
// Go API (Build), and the same queries computed in plain Go over the same
// generated events (Oracle), which the end-to-end tests compare the
// committed output with.
//
// The queries follow the Nexmark suite's SQL for Flink
// (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries)
// with event-time windows where the SQL has them; q4 takes Beam's window
// (NexmarkLauncher Query4: the mean closing price per category over
// sliding windows) where Flink's SQL keeps an unbounded updating
// aggregate, so that its results are final rows an exactly-once sink can
// commit.
//
//	q0  pass-through: every bid.
//	q1  currency conversion: every bid, its price in euros (× 0.908).
//	q2  selection: the bids on auctions whose id is a multiple of 123.
//	q3  local item suggestion: auctions of category 10 by people in OR, ID
//	    or CA (an incremental join of people and auctions on the seller).
//	q4  average price per category: each auction's winning bid (the
//	    highest bid between its start and its expiry), averaged per
//	    category over 10 s windows sliding by 5 s of the auctions' expiry.
//	q5  hot items: per 10 s window sliding by 2 s, the auctions with the
//	    most bids.
//	q7  highest bid: per 10 s tumbling window, the bids of the highest
//	    price.
//	q8  monitor new users: the people who put up an auction in the same
//	    10 s tumbling window in which they registered (a window join).
//
// Every result has a line, the text both the file sink and the oracle
// write, so a run's committed lines are checked against the oracle's as
// multisets.
package queries

import (
	"fmt"
	"strconv"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/files"
	"github.com/weirproject/weir/nexmark"
	"github.com/weirproject/weir/sdk"
)

// Names are the queries, in order.
var Names = []string{"q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8"}

// Options are a run's settings. Only those that go into the job graph
// (everything but the choice of query and sink) may differ between the
// program that submits the job and the TaskManagers that run it.
type Options struct {
	// Events is how many events the source generates (0: unbounded).
	Events int64
	// Rate limits the whole stream to this many events/s (0: none).
	Rate float64
	// FirstEventRate is the events per second of event time (the
	// generator's inter-event delay is its inverse); 0 takes the
	// generator's default, 10,000.
	FirstEventRate float64
	// Parallelism of every vertex (default 1).
	Parallelism int
	// Out is the file sink's directory; empty: the discarding sink.
	Out string
	// Checkpoint is the checkpoint interval (0: 10 s).
	Checkpoint time.Duration
	// Pebble keeps keyed state in Pebble, with incremental checkpoints
	// when Incremental; otherwise on the heap.
	Pebble, Incremental bool
}

// SetState sets the keyed state backend by name: heap, pebble, or
// pebble-incremental (Pebble with incremental checkpoints).
func (o *Options) SetState(backend string) error {
	switch backend {
	case "heap":
		o.Pebble, o.Incremental = false, false
	case "pebble":
		o.Pebble, o.Incremental = true, false
	case "pebble-incremental":
		o.Pebble, o.Incremental = true, true
	default:
		return fmt.Errorf("nexmark: state backend: want heap, pebble or pebble-incremental, got %q", backend)
	}
	return nil
}

// Windows of the queries, as in the Nexmark suite.
const (
	q4Size, q4Slide = 10 * time.Second, 5 * time.Second
	q5Size, q5Slide = 10 * time.Second, 2 * time.Second
	q7Size          = 10 * time.Second
	q8Size          = 10 * time.Second
)

// Build is query q as a job of the Go API.
func Build(q string, o Options) (*weir.Job, error) {
	b, ok := builders[q]
	if !ok {
		return nil, fmt.Errorf("nexmark: unknown query %q (have %v)", q, Names)
	}
	if o.Parallelism <= 0 {
		o.Parallelism = 1
	}
	if o.Checkpoint <= 0 {
		o.Checkpoint = 10 * time.Second
	}
	opts := []weir.JobOption{weir.Checkpointing(o.Checkpoint)}
	if o.Pebble {
		opts = append(opts, weir.PebbleState(o.Incremental))
	}
	j := weir.NewJob("nexmark-"+q, opts...)
	cfg := nexmark.Config{Events: o.Events, Rate: o.Rate, FirstEventRate: o.FirstEventRate}
	events := weir.FromSource(j, "nexmark", nexmark.Source(cfg), weir.Parallelism(o.Parallelism), weir.Watermarks(0, 0))
	b(events, o)
	return j, nil
}

var builders = map[string]func(*weir.Stream[nexmark.Event], Options){
	"q0": func(s *weir.Stream[nexmark.Event], o Options) {
		sink("q0", o, weir.FlatMap(s, "q0", Q0, par(o)), BidLine)
	},
	"q1": func(s *weir.Stream[nexmark.Event], o Options) {
		sink("q1", o, weir.FlatMap(s, "q1", Q1, par(o)), EuroBid.Line)
	},
	"q2": func(s *weir.Stream[nexmark.Event], o Options) {
		sink("q2", o, weir.FlatMap(s, "q2", Q2, par(o)), AuctionPrice.Line)
	},
	"q3": buildQ3,
	"q4": buildQ4,
	"q5": buildQ5,
	"q7": buildQ7,
	"q8": buildQ8,
}

func par(o Options) weir.VertexOption { return weir.Parallelism(o.Parallelism) }

// sink ends query q: the file sink with Out, each result written as
// format makes it (the oracle's lines are made the same way), else the
// discarding sink (its records are counted in the vertex's metrics).
// Every vertex name is the query's own, so one TaskManager can run every
// query with either sink (Registry).
func sink[T any](q string, o Options, s *weir.Stream[T], format func(T) string) {
	if o.Out == "" {
		weir.SinkTo(s, q+"-discard", weir.Discard[T](), par(o))
		return
	}
	weir.SinkTo(s, q+"-out", files.Sink(o.Out, format), par(o))
}

// Registry is the operators of every query with either sink: a
// TaskManager with them runs any query submitted. The source vertex is
// the same in every query, and registered once.
func Registry() (*sdk.Registry, error) {
	reg := sdk.NewRegistry()
	seen := map[string]bool{}
	for _, q := range Names {
		for _, out := range []string{"", "file"} {
			j, err := Build(q, Options{Out: out})
			if err != nil {
				return nil, err
			}
			if _, err := j.Graph(); err != nil {
				return nil, err
			}
			jr := j.Registry()
			for _, name := range jr.Names() {
				if seen[name] {
					continue
				}
				seen[name] = true
				if src, _, _ := jr.Lookup(name); src != nil {
					reg.RegisterSource(name, func() sdk.Source { s, _, _ := jr.Lookup(name); return s })
				} else {
					reg.RegisterOperator(name, func() sdk.Operator { _, op, _ := jr.Lookup(name); return op })
				}
			}
		}
	}
	return reg, nil
}

// BidLine is q0's and q7's row: the bid's auction, bidder, price,
// dateTime and extra.
func BidLine(b nexmark.Bid) string {
	return fmt.Sprintf("%d,%d,%d,%d,%s", b.Auction, b.Bidder, b.Price, b.DateTime, b.Extra)
}

// Q0 passes the bids through.
func Q0(e nexmark.Event, emit func(nexmark.Bid)) {
	if e.Bid != nil {
		emit(*e.Bid)
	}
}

// EuroBid is q1's row: the price in thousandths of a euro cent
// (0.908 × price, exactly, as Flink's DECIMAL).
type EuroBid struct {
	Auction, Bidder, PriceMilli, DateTime int64
	Extra                                 string
}

func (b EuroBid) Line() string {
	return fmt.Sprintf("%d,%d,%d.%03d,%d,%s", b.Auction, b.Bidder, b.PriceMilli/1000, b.PriceMilli%1000, b.DateTime, b.Extra)
}

// Q1 converts the bids' prices to euros.
func Q1(e nexmark.Event, emit func(EuroBid)) {
	if b := e.Bid; b != nil {
		emit(EuroBid{Auction: b.Auction, Bidder: b.Bidder, PriceMilli: b.Price * 908, DateTime: b.DateTime, Extra: b.Extra})
	}
}

// AuctionPrice is q2's row.
type AuctionPrice struct{ Auction, Price int64 }

func (a AuctionPrice) Line() string { return fmt.Sprintf("%d,%d", a.Auction, a.Price) }

// Q2 selects the bids on every 123rd auction.
func Q2(e nexmark.Event, emit func(AuctionPrice)) {
	if b := e.Bid; b != nil && b.Auction%123 == 0 {
		emit(AuctionPrice{b.Auction, b.Price})
	}
}

// Suggestion is q3's row: a seller in one of q3's states and an auction
// of theirs in category 10.
type Suggestion struct {
	Name, City, State string
	Auction           int64
}

func (s Suggestion) Line() string {
	return fmt.Sprintf("%s,%s,%s,%d", s.Name, s.City, s.State, s.Auction)
}

// q3Person and q3Auction are q3's filters.
func q3Person(p *nexmark.Person) bool {
	return p != nil && (p.State == "OR" || p.State == "ID" || p.State == "CA")
}

func q3Auction(a *nexmark.Auction) bool { return a != nil && a.Category == 10 }

// sellerKey is the person a q3 or q8 event is about: the person, or the
// auction's seller.
func sellerKey(e nexmark.Event) int64 {
	if e.Person != nil {
		return e.Person.ID
	}
	return e.Auction.Seller
}

func buildQ3(s *weir.Stream[nexmark.Event], o Options) {
	in := weir.Filter(s, "q3-filter", func(e nexmark.Event) bool { return q3Person(e.Person) || q3Auction(e.Auction) }, par(o))
	joined := weir.Process(weir.KeyBy(in, sellerKey), "q3-join", newQ3Join, par(o))
	sink("q3", o, joined, Suggestion.Line)
}

// CategoryPrice is q4's row: the mean winning price (Sum/Count, in
// cents) of a category's auctions that closed in a window.
type CategoryPrice struct {
	Category, Start, End int64
	Sum, Count           int64
}

func (c CategoryPrice) Line() string {
	return fmt.Sprintf("%d,%d,%d,%s,%d", c.Category, c.Start, c.End, strconv.FormatFloat(float64(c.Sum)/float64(c.Count), 'f', 2, 64), c.Count)
}

// Winner is an auction's winning bid.
type Winner struct{ Auction, Category, Price int64 }

type sumCount struct{ Sum, Count int64 }

func buildQ4(s *weir.Stream[nexmark.Event], o Options) {
	in := weir.Filter(s, "q4-filter", func(e nexmark.Event) bool { return e.Auction != nil || e.Bid != nil }, par(o))
	winners := weir.Process(weir.KeyBy(in, auctionKey), "q4-winners", newWinningBids, par(o))
	byCategory := weir.KeyBy(winners, func(w Winner) int64 { return w.Category })
	means := weir.Aggregate(weir.Window(byCategory, weir.Sliding(q4Size, q4Slide)), "q4-mean", weir.AggregateFuncs[Winner, sumCount, sumCount]{
		CreateFn: func() sumCount { return sumCount{} },
		AddFn:    func(a sumCount, w Winner) sumCount { return sumCount{a.Sum + w.Price, a.Count + 1} },
		MergeFn:  func(a, b sumCount) sumCount { return sumCount{a.Sum + b.Sum, a.Count + b.Count} },
		ResultFn: func(a sumCount) sumCount { return a },
	}, par(o))
	sink("q4", o, weir.Map(means, "q4-rows", func(w weir.Windowed[int64, sumCount]) CategoryPrice {
		return CategoryPrice{Category: w.Key, Start: int64(w.Start), End: int64(w.End), Sum: w.Value.Sum, Count: w.Value.Count}
	}, par(o)), CategoryPrice.Line)
}

// auctionKey is the auction a q4 event is about.
func auctionKey(e nexmark.Event) int64 {
	if e.Auction != nil {
		return e.Auction.ID
	}
	return e.Bid.Auction
}

// HotItem is q5's row: an auction with the most bids in a window.
type HotItem struct{ Start, End, Auction, Bids int64 }

func (h HotItem) Line() string { return fmt.Sprintf("%d,%d,%d,%d", h.Start, h.End, h.Auction, h.Bids) }

// top is the items of the highest score in a window, ties kept: q5's
// auctions with the most bids, q7's bids of the highest price. The
// accumulators the window operator hands over are decoded afresh for
// every call, so merge may append to them.
type top[T any] struct {
	Score int64
	Items []T
}

func (t top[T]) merge(o top[T]) top[T] {
	switch {
	case o.Score > t.Score:
		return o
	case o.Score == t.Score:
		t.Items = append(t.Items, o.Items...)
	}
	return t
}

func buildQ5(s *weir.Stream[nexmark.Event], o Options) {
	bids := weir.FlatMap(s, "q5-bids", func(e nexmark.Event, emit func(int64)) {
		if e.Bid != nil {
			emit(e.Bid.Auction)
		}
	}, par(o))
	counts := weir.Aggregate(weir.Window(weir.KeyBy(bids, func(a int64) int64 { return a }), weir.Sliding(q5Size, q5Slide)), "q5-count",
		weir.AggregateFuncs[int64, int64, int64]{
			CreateFn: func() int64 { return 0 },
			AddFn:    func(n int64, _ int64) int64 { return n + 1 },
			MergeFn:  func(a, b int64) int64 { return a + b },
			ResultFn: func(n int64) int64 { return n },
		}, par(o))
	// A window's counts come at its last instant, so a tumbling window of
	// the slide holds exactly one sliding window's counts, keyed by its
	// start.
	byWindow := weir.KeyBy(counts, func(w weir.Windowed[int64, int64]) int64 { return int64(w.Start) })
	max := weir.Aggregate(weir.Window(byWindow, weir.Tumbling(q5Slide)), "q5-max",
		weir.AggregateFuncs[weir.Windowed[int64, int64], top[int64], top[int64]]{
			CreateFn: func() top[int64] { return top[int64]{} },
			AddFn: func(t top[int64], w weir.Windowed[int64, int64]) top[int64] {
				return t.merge(top[int64]{w.Value, []int64{w.Key}})
			},
			MergeFn:  top[int64].merge,
			ResultFn: func(t top[int64]) top[int64] { return t },
		}, par(o))
	rows := weir.FlatMap(max, "q5-rows", func(w weir.Windowed[int64, top[int64]], emit func(HotItem)) {
		for _, a := range w.Value.Items {
			emit(HotItem{Start: w.Key, End: w.Key + q5Size.Milliseconds(), Auction: a, Bids: w.Value.Score})
		}
	}, par(o))
	sink("q5", o, rows, HotItem.Line)
}

func buildQ7(s *weir.Stream[nexmark.Event], o Options) {
	bids := weir.FlatMap(s, "q7-bids", func(e nexmark.Event, emit func(nexmark.Bid)) {
		if e.Bid != nil {
			emit(*e.Bid)
		}
	}, par(o))
	// Two stages, as a combiner would: the highest per auction and window
	// spreads the work over the subtasks, then one key per window takes
	// the highest of those.
	type highest = top[nexmark.Bid]
	agg := weir.AggregateFuncs[nexmark.Bid, highest, highest]{
		CreateFn: func() highest { return highest{Score: -1} },
		AddFn:    func(h highest, b nexmark.Bid) highest { return h.merge(highest{b.Price, []nexmark.Bid{b}}) },
		MergeFn:  highest.merge,
		ResultFn: func(h highest) highest { return h },
	}
	perAuction := weir.Aggregate(weir.Window(weir.KeyBy(bids, func(b nexmark.Bid) int64 { return b.Auction }), weir.Tumbling(q7Size)), "q7-auction", agg, par(o))
	byWindow := weir.KeyBy(perAuction, func(w weir.Windowed[int64, highest]) int64 { return int64(w.Start) })
	perWindow := weir.Aggregate(weir.Window(byWindow, weir.Tumbling(q7Size)), "q7-window",
		weir.AggregateFuncs[weir.Windowed[int64, highest], highest, highest]{
			CreateFn: func() highest { return highest{Score: -1} },
			AddFn:    func(h highest, w weir.Windowed[int64, highest]) highest { return h.merge(w.Value) },
			MergeFn:  highest.merge,
			ResultFn: func(h highest) highest { return h },
		}, par(o))
	rows := weir.FlatMap(perWindow, "q7-rows", func(w weir.Windowed[int64, highest], emit func(nexmark.Bid)) {
		for _, b := range w.Value.Items {
			emit(b)
		}
	}, par(o))
	sink("q7", o, rows, BidLine)
}

// NewUser is q8's row: a person who registered and put up an auction in
// the window starting at Start.
type NewUser struct {
	ID    int64
	Name  string
	Start int64
}

func (u NewUser) Line() string { return fmt.Sprintf("%d,%s,%d", u.ID, u.Name, u.Start) }

// seen is what a q8 window knows of a person: their name when they
// registered in it, and whether they put up an auction in it.
type seen struct {
	Registered, Sold bool
	Name             string
}

func buildQ8(s *weir.Stream[nexmark.Event], o Options) {
	in := weir.Filter(s, "q8-filter", func(e nexmark.Event) bool { return e.Person != nil || e.Auction != nil }, par(o))
	windows := weir.Aggregate(weir.Window(weir.KeyBy(in, sellerKey), weir.Tumbling(q8Size)), "q8-join",
		weir.AggregateFuncs[nexmark.Event, seen, seen]{
			CreateFn: func() seen { return seen{} },
			AddFn: func(s seen, e nexmark.Event) seen {
				if e.Person != nil {
					s.Registered, s.Name = true, e.Person.Name
				} else {
					s.Sold = true
				}
				return s
			},
			MergeFn: func(a, b seen) seen {
				if b.Registered {
					a.Registered, a.Name = true, b.Name
				}
				a.Sold = a.Sold || b.Sold
				return a
			},
			ResultFn: func(s seen) seen { return s },
		}, par(o))
	rows := weir.FlatMap(windows, "q8-rows", func(w weir.Windowed[int64, seen], emit func(NewUser)) {
		if w.Value.Registered && w.Value.Sold {
			emit(NewUser{ID: w.Key, Name: w.Value.Name, Start: int64(w.Start)})
		}
	}, par(o))
	sink("q8", o, rows, NewUser.Line)
}
