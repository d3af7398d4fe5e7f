package nexmarksql

import (
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/weirproject/weir/internal/nexmark"
)

// Oracle returns the rows query q outputs over events 0 … events−1 of the
// stream cfg describes, as the lines of a CSV file (columns in the
// SELECT's order, values as PostgreSQL prints them: see row), sorted. A
// run's committed lines, sorted, must equal them, duplicates included.
//
// The oracles take the semantics a bounded run has in Weir, which each
// query's oracle spells out. Common to all: event-time windows are Flink's
// window TVFs, aligned to the epoch, [start, end), each emitted once, final,
// when the watermark passes its end; the watermark trails the largest
// date_time of each split (4 s by default), and the generator's times never
// decrease within a split, so no record is late; and the end of the bounded
// input takes the watermark to +∞, so every window holding data fires. The
// result is therefore what the query computes over the whole input as a
// batch.
//
// For an updating query (UpdatingNames) the lines are its final result,
// what the query returns run once as a batch over the same events: the
// state its sink's changelog leaves once replayed (package
// internal/sql/changelog). Where ROW_NUMBER ranks equal values (q9, q18,
// q19) the result is one of several correct ones, ties broken by event
// order; CheckFinal accepts any of them.
//
// cfg is ScriptOptions.Generator: its nil USStates is USStates, the
// lower-case states a script's person source is given.
func Oracle(q string, cfg nexmark.Config, events int64) ([]string, error) {
	o, ok := oracles[q]
	if !ok {
		return nil, fmt.Errorf("nexmarksql: unknown query %q (have %v and %v)", q, Names, UpdatingNames)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if events < 0 {
		return nil, fmt.Errorf("nexmarksql: negative event count %d", events)
	}
	lines := o.run(generate(withStates(cfg), events, o.kinds))
	slices.Sort(lines)
	return lines, nil
}

// generate yields events 0 … events−1 of the kinds given, generating no
// other: most queries read one kind, and bids are 46 events in 50.
func generate(cfg nexmark.Config, events int64, kinds []nexmark.Kind) iter.Seq[nexmark.Event] {
	return func(yield func(nexmark.Event) bool) {
		for n := range events {
			if slices.Contains(kinds, nexmark.KindOf(n)) && !yield(nexmark.Generate(cfg, n)) {
				return
			}
		}
	}
}

type oracle struct {
	kinds []nexmark.Kind
	// run returns the output lines, in any order.
	run func(iter.Seq[nexmark.Event]) []string
}

var (
	bidsOnly        = []nexmark.Kind{nexmark.KindBid}
	auctionsAndBids = []nexmark.Kind{nexmark.KindAuction, nexmark.KindBid}
)

var oracles = map[string]oracle{
	"q0":  {bidsOnly, q0},
	"q1":  {bidsOnly, q1},
	"q2":  {bidsOnly, q2},
	"q3":  {[]nexmark.Kind{nexmark.KindPerson, nexmark.KindAuction}, q3},
	"q5":  {bidsOnly, q5},
	"q7":  {bidsOnly, q7},
	"q8":  {[]nexmark.Kind{nexmark.KindPerson, nexmark.KindAuction}, q8},
	"q10": {bidsOnly, q10},
	"q11": {bidsOnly, q11},
	"q12": {bidsOnly, q12},
	"q14": {bidsOnly, q14},
	"q20": {[]nexmark.Kind{nexmark.KindAuction, nexmark.KindBid}, q20},
	"q21": {bidsOnly, q21},
	"q22": {bidsOnly, q22},

	// The updating queries' final results (oracle_updating.go).
	"q4":  {auctionsAndBids, q4},
	"q6":  {auctionsAndBids, q6},
	"q9":  {auctionsAndBids, q9},
	"q15": {bidsOnly, q15},
	"q16": {bidsOnly, q16},
	"q17": {bidsOnly, q17},
	"q18": {bidsOnly, q18},
	"q19": {bidsOnly, q19},
}

// eachBid maps every bid to a line, or to none when f returns false.
func eachBid(events iter.Seq[nexmark.Event], f func(r *row, b *nexmark.Bid) bool) []string {
	var out []string
	var r row
	for e := range events {
		if e.Bid != nil && f(r.reset(), e.Bid) {
			out = append(out, r.String())
		}
	}
	return out
}

// q0 passes every bid through: auction, bidder, price, date_time.
func q0(events iter.Seq[nexmark.Event]) []string {
	return eachBid(events, func(r *row, b *nexmark.Bid) bool {
		r.i64(b.Auction).i64(b.Bidder).i64(b.Price).ts(b.DateTime)
		return true
	})
}

// q1 is every bid with 0.908 * price: a NUMERIC literal of scale 3 times a
// BIGINT is NUMERIC of scale 3, exact, so price 1000 prints 908.000.
func q1(events iter.Seq[nexmark.Event]) []string {
	return eachBid(events, func(r *row, b *nexmark.Bid) bool {
		r.i64(b.Auction).i64(b.Bidder).num(b.Price*908, 3).ts(b.DateTime)
		return true
	})
}

// q2 is the bids on auctions 1007, 1020, 2001, 2019 and 2087: auction,
// price. Auction ids start at 1000, three every 50 events, so 2001, 2019
// and 2087 are created at events 16,653, 16,953 and 18,102; a bid may name
// an auction up to ten ahead, but a stream much shorter has no bids on
// them.
func q2(events iter.Seq[nexmark.Event]) []string {
	return eachBid(events, func(r *row, b *nexmark.Bid) bool {
		switch b.Auction {
		case 1007, 1020, 2001, 2019, 2087:
			r.i64(b.Auction).i64(b.Price)
			return true
		}
		return false
	})
}

// q3 is a regular inner join of two append-only streams, auctions of
// category 10 and people in the states 'or', 'id' or 'ca', on seller = id:
// every matching pair ever, output once, whichever side came first: name,
// city, state, auction id. The comparison is case-sensitive, and the
// states are lower-case because RisingWave's generator (nexmark-rs) writes
// them so; internal/nexmark writes them upper-case by default, as the Java
// suites do, so a script configures it with lower-case USStates (and over
// upper-case ones q3 is empty).
func q3(events iter.Seq[nexmark.Event]) []string {
	people := map[int64]*nexmark.Person{}
	var auctions []*nexmark.Auction
	for e := range events {
		switch {
		case e.Person != nil:
			if s := e.Person.State; s == "or" || s == "id" || s == "ca" {
				people[e.Person.ID] = e.Person
			}
		case e.Auction != nil:
			if e.Auction.Category == 10 {
				auctions = append(auctions, e.Auction)
			}
		}
	}
	var out []string
	var r row
	for _, a := range auctions {
		if p := people[a.Seller]; p != nil {
			out = append(out, r.reset().text(p.Name).text(p.City).text(p.State).i64(a.ID).String())
		}
	}
	return out
}

const (
	second = int64(time.Second / time.Millisecond)
	// windowGap is q11's session gap and q7's and q8's window size.
	windowGap = 10 * second
)

// floorDiv is ⌊a/b⌋ for b > 0, so that windows before the epoch align too.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// hopStarts are the starts of the windows of size, sliding by slide and
// aligned to the epoch, that hold t: [s, s+size) for s a multiple of slide
// with t−size < s ≤ t (Flink's HOP).
func hopStarts(t, slide, size int64) iter.Seq[int64] {
	return func(yield func(int64) bool) {
		for s := floorDiv(t, slide) * slide; s > t-size; s -= slide {
			if !yield(s) {
				return
			}
		}
	}
}

// q5 counts the bids per auction in HOP windows (RisingWave's argument
// order: the slide, 2 s, then the size, 10 s), and joins those counts with
// their maximum per window start on the start and num >= maxn: per
// window, the auctions with the most bids, as auction, num. Each window's
// counts are final when emitted (the window has closed), so the join sees
// each once; the output has no window column, so equal rows of different
// windows are duplicates, kept.
func q5(events iter.Seq[nexmark.Event]) []string {
	type cell struct{ start, auction int64 }
	counts := map[cell]int64{}
	for e := range events {
		if b := e.Bid; b != nil {
			for s := range hopStarts(b.DateTime, 2*second, 10*second) {
				counts[cell{s, b.Auction}]++
			}
		}
	}
	top := map[int64]int64{}
	for c, n := range counts {
		top[c.start] = max(top[c.start], n)
	}
	var out []string
	var r row
	for c, n := range counts {
		if n >= top[c.start] {
			out = append(out, r.reset().i64(c.auction).i64(n).String())
		}
	}
	return out
}

// q7 joins every bid B with the highest price of each 10 s tumbling window,
// keyed by the window's end E, on B.price = the maximum and B.date_time
// BETWEEN E − 10 s AND E, both ends included: a bid at exactly E (the
// first instant of the next window) matches the window ending there as
// well as its own, and is output once per window it matches. Output:
// auction, price, bidder, date_time.
func q7(events iter.Seq[nexmark.Event]) []string {
	top := map[int64]int64{} // window end → highest price
	byPrice := map[int64][]*nexmark.Bid{}
	for e := range events {
		if b := e.Bid; b != nil {
			end := floorDiv(b.DateTime, windowGap)*windowGap + windowGap
			if cur, ok := top[end]; !ok || b.Price > cur {
				top[end] = b.Price
			}
			byPrice[b.Price] = append(byPrice[b.Price], b)
		}
	}
	var out []string
	var r row
	for end, price := range top {
		for _, b := range byPrice[price] {
			if end-windowGap <= b.DateTime && b.DateTime <= end {
				out = append(out, r.reset().i64(b.Auction).i64(b.Price).i64(b.Bidder).ts(b.DateTime).String())
			}
		}
	}
	return out
}

// q8 groups people by (id, name, window) and auctions by (seller, window)
// over 10 s tumbling windows, so each side has each key once per window,
// and joins them on id = seller and equal window bounds: one row per
// person who put up an auction in the window they registered in, as id,
// name, window start.
func q8(events iter.Seq[nexmark.Event]) []string {
	type key struct{ id, start int64 }
	people := map[key]string{} // → name
	sellers := map[key]bool{}
	for e := range events {
		switch {
		case e.Person != nil:
			people[key{e.Person.ID, floorDiv(e.Person.DateTime, windowGap) * windowGap}] = e.Person.Name
		case e.Auction != nil:
			sellers[key{e.Auction.Seller, floorDiv(e.Auction.DateTime, windowGap) * windowGap}] = true
		}
	}
	var out []string
	var r row
	for k, name := range people {
		if sellers[k] {
			out = append(out, r.reset().i64(k.id).text(name).ts(k.start).String())
		}
	}
	return out
}

// q10 is every bid with TO_CHAR(date_time, 'YYYY-MM-DD') and 'HH:MI', HH
// being PostgreSQL's 12-hour clock (01–12: midnight is 12) and MI the
// minute, of the UTC timestamp: auction, bidder, price, date_time, date,
// time.
func q10(events iter.Seq[nexmark.Event]) []string {
	return eachBid(events, func(r *row, b *nexmark.Bid) bool {
		t := time.UnixMilli(b.DateTime).UTC()
		h := t.Hour() % 12
		if h == 0 {
			h = 12
		}
		r.i64(b.Auction).i64(b.Bidder).i64(b.Price).ts(b.DateTime).
			text(t.Format("2006-01-02")).text(fmt.Sprintf("%02d:%02d", h, t.Minute()))
		return true
	})
}

// q11 counts each bidder's bids per session window of gap 10 s, the
// SESSION table function's windows as Weir's session window operator
// (internal/operators/window.go, addToSession) makes them, which here is
// also Flink's rule: a record at t opens the window [t, t+gap), and it
// merges with every session of its key it overlaps or touches (s.start ≤
// t+gap and s.end ≥ t, inclusive at both ends as Flink's
// TimeWindow.intersects), so a bid at most the gap after the session's
// last bid extends it: two bids exactly the gap apart are one session, not
// two. window_start is the session's first bid's time and window_end its
// last bid's + the gap; the session is emitted once, when the watermark
// passes window_end − 1 ms (its last millisecond). Sessions of a key are
// merged as their records arrive, so arrival order could only matter if a
// session fired before a record touching it arrived; the watermark trails
// every split by 4 s and event times never decrease within a split, so no
// such record comes and the sessions are those of the whole input sorted.
// Output: bidder, bid_count, starttime, endtime.
func q11(events iter.Seq[nexmark.Event]) []string {
	times := map[int64][]int64{}
	for e := range events {
		if b := e.Bid; b != nil {
			times[b.Bidder] = append(times[b.Bidder], b.DateTime)
		}
	}
	var out []string
	var r row
	for bidder, ts := range times {
		slices.Sort(ts)
		start, last, n := ts[0], ts[0], int64(1)
		emit := func() {
			out = append(out, r.reset().i64(bidder).i64(n).ts(start).ts(last+windowGap).String())
		}
		for _, t := range ts[1:] {
			if t <= last+windowGap {
				last, n = t, n+1
				continue
			}
			emit()
			start, last, n = t, t, 1
		}
		emit()
	}
	return out
}

// q12 counts bids per bidder per 10 s tumbling window of processing time
// (p_time), so which window a bid falls in depends on when it was read and
// its rows are not reproducible. What is: every bid is counted in exactly
// one window. The oracle is therefore each bidder's total bids, as bidder,
// count, and a checker sums the query's bid_count per bidder to compare.
func q12(events iter.Seq[nexmark.Event]) []string {
	counts := map[int64]int64{}
	for e := range events {
		if b := e.Bid; b != nil {
			counts[b.Bidder]++
		}
	}
	var out []string
	var r row
	for bidder, n := range counts {
		out = append(out, r.reset().i64(bidder).i64(n).String())
	}
	return out
}

// q14 is the bids with 1,000,000 < 0.908 * price < 50,000,000 (compared
// exactly, as NUMERIC), with that product (NUMERIC, scale 3) and the time
// of day of the UTC hour (8–18 dayTime, ≤ 6 or ≥ 20 nightTime, else
// otherTime): auction, bidder, price, bidTimeType, date_time. (The suite's
// count_char(extra, 'c') column is left out.)
func q14(events iter.Seq[nexmark.Event]) []string {
	return eachBid(events, func(r *row, b *nexmark.Bid) bool {
		price := b.Price * 908 // thousandths
		if price <= 1_000_000*1000 || price >= 50_000_000*1000 {
			return false
		}
		kind := "otherTime"
		switch h := time.UnixMilli(b.DateTime).UTC().Hour(); {
		case h >= 8 && h <= 18:
			kind = "dayTime"
		case h <= 6 || h >= 20:
			kind = "nightTime"
		}
		r.i64(b.Auction).i64(b.Bidder).num(price, 3).text(kind).ts(b.DateTime)
		return true
	})
}

// q20 is a regular inner join of bids with auctions of category 10 on
// B.auction = A.id: every matching pair, output once, including bids read
// before their auction (a bid may name one of the next ten auctions). The
// bid's columns, then the auction's.
func q20(events iter.Seq[nexmark.Event]) []string {
	auctions := map[int64]*nexmark.Auction{}
	var all []*nexmark.Bid
	for e := range events {
		switch {
		case e.Auction != nil:
			if e.Auction.Category == 10 {
				auctions[e.Auction.ID] = e.Auction
			}
		case e.Bid != nil:
			all = append(all, e.Bid)
		}
	}
	var out []string
	var r row
	for _, b := range all {
		a := auctions[b.Auction]
		if a == nil {
			continue
		}
		r.reset().i64(b.Auction).i64(b.Bidder).i64(b.Price).text(b.Channel).text(b.URL).ts(b.DateTime).text(b.Extra)
		r.text(a.ItemName).text(a.Description).i64(a.InitialBid).i64(a.Reserve).ts(a.DateTime).ts(a.Expires).
			i64(a.Seller).i64(a.Category).text(a.Extra)
		out = append(out, r.String())
	}
	return out
}

var channelID = regexp.MustCompile(`(&|^)channel_id=([^&]*)`)

// regexpGroup2 is (regexp_match(s, '(&|^)channel_id=([^&]*)'))[2]:
// group 2 of the first match, NULL (ok false) if none. The pattern has at
// most one match starting at any position, so Go's leftmost-first and
// PostgreSQL's leftmost-longest rules find the same one.
func regexpGroup2(s string) (string, bool) {
	m := channelID.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	return m[2], true
}

// q21 is the bids with a known channel id: the four hot channels, whatever
// their case, map to '0' … '3', any other channel to the channel_id
// parameter of its url; bids with neither are dropped. Output: auction,
// bidder, price, channel, channel_id.
func q21(events iter.Seq[nexmark.Event]) []string {
	return eachBid(events, func(r *row, b *nexmark.Bid) bool {
		var id string
		switch strings.ToLower(b.Channel) {
		case "apple":
			id = "0"
		case "google":
			id = "1"
		case "facebook":
			id = "2"
		case "baidu":
			id = "3"
		default:
			var ok bool
			if id, ok = regexpGroup2(b.URL); !ok {
				return false
			}
		}
		r.i64(b.Auction).i64(b.Bidder).i64(b.Price).text(b.Channel).text(id)
		return true
	})
}

// splitPart is PostgreSQL's split_part(s, sep, n) for n ≥ 1: the n-th
// field, the empty string past the last.
func splitPart(s, sep string, n int) string {
	parts := strings.Split(s, sep)
	if n > len(parts) {
		return ""
	}
	return parts[n-1]
}

// q22 is every bid with the first three directories of its url (fields 4 …
// 6 of the url split at '/'; "https:" and "" and the host are 1 … 3):
// auction, bidder, price, channel, dir1, dir2, dir3.
func q22(events iter.Seq[nexmark.Event]) []string {
	return eachBid(events, func(r *row, b *nexmark.Bid) bool {
		r.i64(b.Auction).i64(b.Bidder).i64(b.Price).text(b.Channel).
			text(splitPart(b.URL, "/", 4)).text(splitPart(b.URL, "/", 5)).text(splitPart(b.URL, "/", 6))
		return true
	})
}
