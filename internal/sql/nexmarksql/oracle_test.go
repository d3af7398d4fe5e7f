package nexmarksql

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/nexmark"
)

// run is query q's oracle over the given events, sorted as Oracle sorts.
func run(q string, events ...nexmark.Event) []string {
	lines := oracles[q].run(slices.Values(events))
	slices.Sort(lines)
	return lines
}

func bid(auction, bidder, price, ms int64) nexmark.Event {
	return nexmark.Event{Kind: nexmark.KindBid, Bid: &nexmark.Bid{
		Auction: auction, Bidder: bidder, Price: price, DateTime: ms,
		Channel: "Google", URL: "https://www.nexmark.com/a/b/c/item.htm?query=1",
	}}
}

func person(id int64, name, city, state string, ms int64) nexmark.Event {
	return nexmark.Event{Kind: nexmark.KindPerson, Person: &nexmark.Person{ID: id, Name: name, City: city, State: state, DateTime: ms}}
}

func auction(id, seller, category, ms int64) nexmark.Event {
	return nexmark.Event{Kind: nexmark.KindAuction, Auction: &nexmark.Auction{ID: id, Seller: seller, Category: category, DateTime: ms}}
}

func check(t *testing.T, q string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", q, got, want)
	}
}

// The oracles over a few events each, their output worked out by hand.
// Times are from the epoch, so a window's start is its time in the text.
func TestOraclesByHand(t *testing.T) {
	check(t, "q1", run("q1", bid(1, 2, 1000, 0), bid(1, 2, 1, 1), bid(1, 2, 0, 2)), []string{
		"1,2,0.000,1970-01-01 00:00:00.002",
		"1,2,0.908,1970-01-01 00:00:00.001",
		"1,2,908.000,1970-01-01 00:00:00",
	})

	check(t, "q2", run("q2", bid(1007, 1, 5, 0), bid(1008, 1, 6, 0), bid(2087, 1, 7, 0), bid(2019, 1, 8, 0)),
		[]string{"1007,5", "2019,8", "2087,7"})

	// Only people in lower-case 'or', 'id' or 'ca' with auctions of
	// category 10; the auction may come first.
	check(t, "q3", run("q3",
		person(1, "Ann, Jr.", "Bend", "or", 0),
		person(2, "Bob", "Bend", "OR", 0),
		auction(13, 3, 10, 1),
		person(3, "Cid", "Boise", "ca", 2),
		auction(10, 1, 10, 3),
		auction(11, 2, 10, 3),
		auction(12, 3, 11, 3),
		auction(14, 9, 10, 3),
	), []string{`"Ann, Jr.",Bend,or,10`, "Cid,Boise,ca,13"})

	// Windows of 10 s sliding by 2 s: a bid at 1 s is in those starting at
	// −8, −6, −4, −2 and 0 s; at 3 s and 3.5 s in −6 … 2 s; at 11 s and
	// 11.5 s in 2 … 10 s. Counts per window start:
	//   −8: a1 1            → 1,1
	//   −6 … 0: a1 2, a2 1  → 1,2 four times
	//   2: a1 1, a2 2, a3 1 → 2,2
	//   4 … 10: a2 1, a3 1  → 2,1 and 3,1 four times (a tie: both)
	check(t, "q5", run("q5", bid(1, 9, 1, 1000), bid(1, 9, 1, 3000), bid(2, 9, 1, 3500), bid(2, 9, 1, 11000), bid(3, 9, 1, 11500)),
		[]string{"1,1", "1,2", "1,2", "1,2", "1,2", "2,1", "2,1", "2,1", "2,1", "2,2", "3,1", "3,1", "3,1", "3,1"})

	// Window [0, 10 s) has max 9, [10, 20 s) 9, [20, 30 s) 7. The bid at
	// exactly 10 s is in the second and matches the first's end too; the
	// bid of price 7 at 15 s is outside [20, 30 s].
	check(t, "q7", run("q7", bid(1, 101, 5, 1000), bid(2, 102, 9, 3000), bid(3, 103, 9, 10000), bid(4, 104, 7, 15000), bid(5, 105, 7, 25000)),
		[]string{
			"2,9,102,1970-01-01 00:00:03",
			"3,9,103,1970-01-01 00:00:10",
			"3,9,103,1970-01-01 00:00:10",
			"5,7,105,1970-01-01 00:00:25",
		})

	// Person 1 sold twice in their window (grouped: one row); person 2
	// sold in the next window; person 3 in theirs; seller 4 is nobody.
	check(t, "q8", run("q8",
		person(1, "Ann", "", "", 1000),
		person(2, "Bob", "", "", 9999),
		person(3, "Cid", "", "", 12000),
		auction(10, 1, 10, 5000),
		auction(11, 1, 10, 6000),
		auction(12, 2, 10, 10000),
		auction(13, 3, 10, 19999),
		auction(14, 4, 10, 1000),
	), []string{"1,Ann,1970-01-01 00:00:00", "3,Cid,1970-01-01 00:00:10"})

	at := func(hh, mm int) int64 { return int64(hh*3600+mm*60) * 1000 }
	check(t, "q10", run("q10", bid(1, 1, 1, at(0, 30)), bid(1, 1, 1, at(12, 0)), bid(1, 1, 1, at(13, 5)), bid(1, 1, 1, at(23, 59))), []string{
		"1,1,1,1970-01-01 00:30:00,1970-01-01,12:30",
		"1,1,1,1970-01-01 12:00:00,1970-01-01,12:00",
		"1,1,1,1970-01-01 13:05:00,1970-01-01,01:05",
		"1,1,1,1970-01-01 23:59:00,1970-01-01,11:59",
	})

	// Bidder 7 at 0, 5 and 15 s (exactly the gap after 5 s: the windows
	// touch and merge) is one session ending 25 s; at 25.001 s a new one.
	// The input need not be in order.
	check(t, "q11", run("q11", bid(1, 7, 1, 5000), bid(1, 7, 1, 0), bid(1, 8, 1, 100), bid(1, 7, 1, 15000), bid(1, 7, 1, 25001)), []string{
		"7,1,1970-01-01 00:00:25.001,1970-01-01 00:00:35.001",
		"7,3,1970-01-01 00:00:00,1970-01-01 00:00:25",
		"8,1,1970-01-01 00:00:00.1,1970-01-01 00:00:10.1",
	})

	check(t, "q12", run("q12", bid(1, 7, 1, 0), bid(2, 8, 1, 0), bid(3, 7, 1, 99_000)), []string{"7,2", "8,1"})

	// 0.908 × price is in (10^6, 5·10^7) for price in [1101322, 55066079]:
	// 1101321 × 0.908 = 999999.468 and 55066080 × 0.908 = 50000000.640.
	// Hours 7 and 19 are neither day nor night.
	q14 := func(price, ms int64, extra string) nexmark.Event {
		e := bid(1, 2, price, ms)
		e.Bid.Extra = extra
		return e
	}
	check(t, "q14", run("q14",
		q14(1101321, 0, ""),
		q14(1101322, at(6, 59), "cabcc"),
		q14(55066079, at(7, 0), ""),
		q14(55066080, 0, ""),
		q14(2000000, at(8, 0), "c"),
		q14(2000000, at(18, 59), "C"),
		q14(2000000, at(19, 0), ""),
		q14(2000000, at(20, 0), ""),
	), []string{
		"1,2,1000000.376,nightTime,1970-01-01 06:59:00",
		"1,2,1816000.000,dayTime,1970-01-01 08:00:00",
		"1,2,1816000.000,dayTime,1970-01-01 18:59:00",
		"1,2,1816000.000,nightTime,1970-01-01 20:00:00",
		"1,2,1816000.000,otherTime,1970-01-01 19:00:00",
		"1,2,49999999.732,otherTime,1970-01-01 07:00:00",
	})

	// Bids on auction 5 (category 10) before and after it; on 6 (category
	// 11) and on 7 (never created) none.
	a5 := auction(5, 1001, 10, 2000)
	a5.Auction.ItemName, a5.Auction.Description, a5.Auction.InitialBid, a5.Auction.Reserve = "item", "a, b", 10, 20
	a5.Auction.Expires, a5.Auction.Extra = 9000, "ae"
	b1, b2 := bid(5, 1002, 30, 1000), bid(5, 1003, 40, 3000)
	b1.Bid.Extra = "be"
	check(t, "q20", run("q20", b1, a5, auction(6, 1001, 11, 2000), b2, bid(6, 1004, 50, 4000), bid(7, 1005, 60, 4000)), []string{
		`5,1002,30,Google,https://www.nexmark.com/a/b/c/item.htm?query=1,1970-01-01 00:00:01,be,item,"a, b",10,20,1970-01-01 00:00:02,1970-01-01 00:00:09,1001,10,ae`,
		`5,1003,40,Google,https://www.nexmark.com/a/b/c/item.htm?query=1,1970-01-01 00:00:03,"",item,"a, b",10,20,1970-01-01 00:00:02,1970-01-01 00:00:09,1001,10,ae`,
	})

	q21 := func(auction int64, channel, url string) nexmark.Event {
		e := bid(auction, 1, 1, 0)
		e.Bid.Channel, e.Bid.URL = channel, url
		return e
	}
	check(t, "q21", run("q21",
		q21(1, "APPLE", "x"),
		q21(2, "Baidu", "https://a/b?query=1&channel_id=9"),
		q21(3, "channel-1", "https://a/b?query=1&channel_id=42&x=1"),
		q21(4, "channel-2", "channel_id=7"),
		q21(5, "channel-3", "https://a/b?query=1"),
		q21(6, "channel-4", "https://a/b?query=1&channel_id="),
		q21(7, "channel-5", "https://a/b?xchannel_id=9"),
		q21(8, "channel-6", "https://a/b?q=1&channel_id=1&channel_id=2"),
	), []string{
		"1,1,1,APPLE,0",
		"2,1,1,Baidu,3",
		"3,1,1,channel-1,42",
		"4,1,1,channel-2,7",
		`6,1,1,channel-4,""`,
		"8,1,1,channel-6,1",
	})

	short := bid(2, 1, 1, 0)
	short.Bid.URL = "a/b/c/d/e" // fields 4 and 5, then past the last
	check(t, "q22", run("q22", bid(1, 1, 1, 0), short), []string{
		"1,1,1,Google,a,b,c",
		`2,1,1,Google,d,e,""`,
	})
}

// fields splits a line of unquoted values.
func fields(t *testing.T, line string) []string {
	t.Helper()
	if strings.Contains(line, `"`) {
		t.Fatalf("a quoted value in %q", line)
	}
	return strings.Split(line, ",")
}

// On the default stream, each query's output checked against what the
// events say directly. 20,000 events span 2 s of event time from
// 2024-01-01 00:00:00: all of it in one 10 s tumbling window, in the same
// five hop windows and in one session per bidder, all at hour 0.
func TestOracleDefaultStream(t *testing.T) {
	const events = 20000
	cfg := nexmark.Config{}
	var all []*nexmark.Bid
	auctions := map[int64]*nexmark.Auction{}
	people := map[int64]*nexmark.Person{}
	for n := range int64(events) {
		switch e := nexmark.Generate(cfg, n); {
		case e.Bid != nil:
			all = append(all, e.Bid)
		case e.Auction != nil:
			auctions[e.Auction.ID] = e.Auction
		case e.Person != nil:
			people[e.Person.ID] = e.Person
		}
	}
	if len(all) != events/50*46 {
		t.Fatalf("%d bids", len(all))
	}
	// Every query twice, all at once: the runs must agree whatever order
	// the oracles' maps are walked in, and Oracle must be safe to call
	// concurrently.
	runs := [2]map[string][]string{{}, {}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range runs {
		for _, q := range Names {
			wg.Go(func() {
				lines, err := Oracle(q, cfg, events)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				runs[i][q] = lines
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	out := runs[0]
	for _, q := range Names {
		lines := out[q]
		if !slices.Equal(runs[1][q], lines) {
			t.Errorf("%s: two runs differ", q)
		}
		if !slices.IsSorted(lines) {
			t.Errorf("%s: not sorted", q)
		}
		if len(lines) == 0 {
			t.Errorf("%s: no lines", q)
		}
	}
	contains := func(q, line string) {
		t.Helper()
		if _, ok := slices.BinarySearch(out[q], line); !ok {
			t.Errorf("%s: no line %q", q, line)
		}
	}

	for _, q := range []string{"q0", "q1", "q10", "q22"} {
		if len(out[q]) != len(all) {
			t.Errorf("%s: %d lines for %d bids", q, len(out[q]), len(all))
		}
	}
	// Event 4 is the first bid, at 0.4 ms (truncated: no fraction); event
	// 10 is at 1 ms.
	for n, ts := range map[int64]string{4: "2024-01-01 00:00:00", 10: "2024-01-01 00:00:00.001"} {
		b := nexmark.Generate(cfg, n).Bid
		contains("q0", fmt.Sprintf("%d,%d,%d,%s", b.Auction, b.Bidder, b.Price, ts))
	}
	// The generator's output is pinned here too: a change to it changes
	// every committed result, and these lines say so first. 10650 × 0.908
	// = 9670.2; 20761948 × 0.908 = 18851848.784.
	contains("q0", "1000,1000,10650,2024-01-01 00:00:00.136")
	contains("q1", "1000,1000,9670.200,2024-01-01 00:00:00.136")
	contains("q0", "1000,1000,20761948,2024-01-01 00:00:00.014")
	contains("q1", "1000,1000,18851848.784,2024-01-01 00:00:00.014")
	contains("q14", "1000,1000,18851848.784,nightTime,2024-01-01 00:00:00.014")

	// q3: the oracle's nil states are the script's lower-case ones, drawn
	// as the default upper-case ones are.
	var q3 []string
	for _, a := range auctions {
		p := people[a.Seller]
		if a.Category != 10 || p == nil {
			continue
		}
		if s := strings.ToLower(p.State); s == "or" || s == "id" || s == "ca" {
			q3 = append(q3, fmt.Sprintf("%s,%s,%s,%d", p.Name, p.City, s, a.ID))
		}
	}
	slices.Sort(q3)
	check(t, "q3", out["q3"], q3)
	if upper, err := Oracle("q3", nexmark.Config{USStates: nexmark.DefaultUSStates()}, events); err != nil || len(upper) != 0 {
		t.Errorf("q3 over upper-case states: %d lines, %v", len(upper), err)
	}

	// q2: every one of its auctions has bids by event 20,000 (2087, the
	// last, is created at event 18,102).
	seen := map[string]bool{}
	for _, l := range out["q2"] {
		seen[fields(t, l)[0]] = true
	}
	if want := []string{"1007", "1020", "2001", "2019", "2087"}; !slices.Equal(slices.Sorted(maps.Keys(seen)), want) {
		t.Errorf("q2 auctions %v, want %v", slices.Sorted(maps.Keys(seen)), want)
	}

	// q5: the five windows hold the same bids, so the auctions with the
	// most bids of the whole stream, five times each.
	perAuction := map[int64]int64{}
	for _, b := range all {
		perAuction[b.Auction]++
	}
	most := slices.Max(slices.Collect(maps.Values(perAuction)))
	var q5 []string
	for a, n := range perAuction {
		if n == most {
			for range 5 {
				q5 = append(q5, fmt.Sprintf("%d,%d", a, n))
			}
		}
	}
	slices.Sort(q5)
	check(t, "q5", out["q5"], q5)

	// q7: one window, so the bids of the highest price.
	top := slices.MaxFunc(all, func(a, b *nexmark.Bid) int { return int(a.Price - b.Price) }).Price
	var q7 []string
	var r row
	for _, b := range all {
		if b.Price == top {
			q7 = append(q7, r.reset().i64(b.Auction).i64(b.Price).i64(b.Bidder).ts(b.DateTime).String())
		}
	}
	slices.Sort(q7)
	check(t, "q7", out["q7"], q7)

	// q8: one window, so the people who put up any auction.
	sellers := map[int64]bool{}
	for _, a := range auctions {
		sellers[a.Seller] = true
	}
	var q8 []string
	for id, p := range people {
		if sellers[id] {
			q8 = append(q8, fmt.Sprintf("%d,%s,2024-01-01 00:00:00", id, p.Name))
		}
	}
	slices.Sort(q8)
	check(t, "q8", out["q8"], q8)

	// q10: midnight is 12 on PostgreSQL's 12-hour clock.
	for _, l := range out["q10"] {
		if !strings.HasSuffix(l, ",2024-01-01,12:00") {
			t.Fatalf("q10: %q", l)
		}
	}

	// q11 and q12: every bidder's bids are within the gap of each other,
	// so one session each, as many bids as q12 counts for them.
	perBidder := map[int64]int64{}
	for _, b := range all {
		perBidder[b.Bidder]++
	}
	var q12 []string
	for bidder, n := range perBidder {
		q12 = append(q12, fmt.Sprintf("%d,%d", bidder, n))
	}
	slices.Sort(q12)
	check(t, "q12", out["q12"], q12)
	if len(out["q11"]) != len(q12) {
		t.Errorf("q11: %d sessions for %d bidders", len(out["q11"]), len(q12))
	}
	for _, l := range out["q11"] {
		f := fields(t, l)
		bidder, _ := strconv.ParseInt(f[0], 10, 64)
		if want := strconv.FormatInt(perBidder[bidder], 10); f[1] != want {
			t.Errorf("q11: %q, want count %s", l, want)
		}
	}

	// q14: 1101322 ≤ price ≤ 55066079 (see TestOraclesByHand), all at
	// night.
	var q14 int
	for _, b := range all {
		if b.Price >= 1101322 && b.Price <= 55066079 {
			q14++
		}
	}
	if len(out["q14"]) != q14 {
		t.Errorf("q14: %d lines for %d bids in range", len(out["q14"]), q14)
	}
	for _, l := range out["q14"] {
		if f := fields(t, l); f[3] != "nightTime" {
			t.Fatalf("q14: %q", l)
		}
	}

	// q20: the bids on auctions of category 10 of the stream.
	var q20 int
	for _, b := range all {
		if a := auctions[b.Auction]; a != nil && a.Category == 10 {
			q20++
		}
	}
	if len(out["q20"]) != q20 {
		t.Errorf("q20: %d lines for %d bids", len(out["q20"]), q20)
	}

	// q21: the hot channels' fixed ids, else the url's channel_id; only
	// the other channels' urls without one (one in ten) are dropped.
	var dropped int
	for _, b := range all {
		if strings.HasPrefix(b.Channel, "channel-") && !strings.Contains(b.URL, "&channel_id=") {
			dropped++
		}
	}
	if len(out["q21"]) != len(all)-dropped {
		t.Errorf("q21: %d lines for %d bids, %d without an id", len(out["q21"]), len(all), dropped)
	}
	hot := map[string]string{"Apple": "0", "Google": "1", "Facebook": "2", "Baidu": "3"}
	for _, l := range out["q21"] {
		f := fields(t, l)
		if id, ok := hot[f[3]]; ok && f[4] != id || !ok && !strings.HasPrefix(f[3], "channel-") {
			t.Fatalf("q21: %q", l)
		}
	}

	// q22: the url is the host, then the three directories.
	dirs := regexp.MustCompile(`^https://www\.nexmark\.com/([^/]+)/([^/]+)/([^/]+)/item\.htm\?query=1`)
	var q22 []string
	for _, b := range all {
		m := dirs.FindStringSubmatch(b.URL)
		if m == nil {
			t.Fatalf("url %q", b.URL)
		}
		q22 = append(q22, fmt.Sprintf("%d,%d,%d,%s,%s,%s,%s", b.Auction, b.Bidder, b.Price, b.Channel, m[1], m[2], m[3]))
	}
	slices.Sort(q22)
	check(t, "q22", out["q22"], q22)

}

// A slower stream, 100 s of event time, crosses many windows and sessions.
func TestOracleSlowStream(t *testing.T) {
	cfg := nexmark.Config{FirstEventRate: 200}
	const events = 20000
	var bids int64
	for n := range int64(events) {
		if nexmark.KindOf(n) == nexmark.KindBid {
			bids++
		}
	}
	get := func(q string) []string {
		lines, err := Oracle(q, cfg, events)
		if err != nil {
			t.Fatal(err)
		}
		return lines
	}
	// Each of the ten 10 s windows has its top bid at least.
	if n := len(get("q7")); n < 10 {
		t.Errorf("q7: %d lines", n)
	}
	if n := len(get("q8")); n == 0 {
		t.Errorf("q8: no lines")
	}
	// Every bid in one session; a bidder's sessions apart by more than
	// the gap (their windows would have merged otherwise).
	type session struct{ start, end time.Time }
	sessions := map[string][]session{}
	var sum int64
	for _, l := range get("q11") {
		f := fields(t, l)
		n, _ := strconv.ParseInt(f[1], 10, 64)
		sum += n
		start, err1 := time.Parse(time.DateTime, f[2])
		end, err2 := time.Parse(time.DateTime, f[3])
		if err1 != nil || err2 != nil || end.Sub(start) < 10*time.Second {
			t.Fatalf("q11: %q", l)
		}
		sessions[f[0]] = append(sessions[f[0]], session{start, end})
	}
	for bidder, ss := range sessions {
		slices.SortFunc(ss, func(a, b session) int { return a.start.Compare(b.start) })
		for i := 1; i < len(ss); i++ {
			if !ss[i].start.After(ss[i-1].end) {
				t.Errorf("q11: bidder %s's sessions %v and %v touch", bidder, ss[i-1], ss[i])
			}
		}
	}
	if sum != bids {
		t.Errorf("q11: %d bids in sessions of %d", sum, bids)
	}
}

// The watermark trails each split's largest event time by 4 s: no event may
// be further behind, for any source (each kind's source reads the same
// split of the one sequence).
func TestNoLateEvents(t *testing.T) {
	const splits = 2
	const delay = 4 * second
	for _, cfg := range []nexmark.Config{{}, {FirstEventRate: 1}, {FirstEventRate: 5e6}} {
		var largest [splits][nexmark.KindBid + 1]int64
		for n := range int64(200_000) {
			ts := cfg.Timestamp(n)
			s := n % splits
			for _, k := range []nexmark.Kind{0, nexmark.KindOf(n)} { // 0: the whole split
				if ts <= largest[s][k]-delay {
					t.Fatalf("rate %v: event %d at %d is behind %d, the largest of split %d", cfg.FirstEventRate, n, ts, largest[s][k], s)
				}
				largest[s][k] = max(largest[s][k], ts)
			}
		}
		// Timestamp is the generator's event time.
		for n := int64(0); n < 200_000; n += 997 {
			if got := nexmark.Generate(cfg, n).DateTime(); got != cfg.Timestamp(n) {
				t.Fatalf("event %d: date_time %d, Timestamp %d", n, got, cfg.Timestamp(n))
			}
		}
	}
}

func TestOracleErrors(t *testing.T) {
	if _, err := Oracle("q99", nexmark.Config{}, 10); err == nil {
		t.Error("q99: no error")
	}
	if _, err := Oracle("q0", nexmark.Config{}, -1); err == nil {
		t.Error("negative events: no error")
	}
	if _, err := Oracle("q0", nexmark.Config{HotAuctionRatio: -1}, 10); err == nil {
		t.Error("bad config: no error")
	}
	if lines, err := Oracle("q0", nexmark.Config{}, 0); err != nil || len(lines) != 0 {
		t.Errorf("no events: %q, %v", lines, err)
	}
}
