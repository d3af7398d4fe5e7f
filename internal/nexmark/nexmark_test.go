package nexmark

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every 50 consecutive events hold exactly 1 person, 3 auctions and 46
// bids, in that order.
func TestProportions(t *testing.T) {
	for _, start := range []int64{0, 50, 12_345 * 50, (1 << 40) / 50 * 50} {
		var counts [4]int
		for n := start; n < start+TotalProportion; n++ {
			e := Generate(Config{}, n)
			if e.Kind != KindOf(n) {
				t.Fatalf("event %d: kind %v, KindOf says %v", n, e.Kind, KindOf(n))
			}
			counts[e.Kind]++
			want := KindBid
			switch off := n - start; {
			case off < 1:
				want = KindPerson
			case off < 4:
				want = KindAuction
			}
			if e.Kind != want {
				t.Fatalf("event %d (offset %d): %v, want %v", n, n-start, e.Kind, want)
			}
		}
		if counts[KindPerson] != 1 || counts[KindAuction] != 3 || counts[KindBid] != 46 {
			t.Fatalf("events from %d: %d people, %d auctions, %d bids; want 1:3:46", start, counts[KindPerson], counts[KindAuction], counts[KindBid])
		}
	}
}

func TestDeterministic(t *testing.T) {
	cfg := Config{HotAuctionRatio: 3, BaseTime: time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC)}
	for n := range int64(2000) {
		a, b := Generate(cfg, n), Generate(cfg, n)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("event %d differs between calls: %+v vs %+v", n, a, b)
		}
	}
	// Generated out of order, the same.
	want := Generate(cfg, 777)
	for n := int64(5000); n > 0; n -= 97 {
		Generate(cfg, n)
	}
	if got := Generate(cfg, 777); !reflect.DeepEqual(got, want) {
		t.Fatalf("event 777 depends on what was generated before")
	}
	// The zero Config is the defaults.
	def := Config{FirstEventRate: 10000, BaseTime: DefaultBaseTime, HotAuctionRatio: 2, HotBiddersRatio: 4,
		HotSellersRatio: 4, NumInFlightAuctions: 100, NumActivePeople: 1000,
		AvgPersonByteSize: 200, AvgAuctionByteSize: 500, AvgBidByteSize: 100}
	for n := range int64(200) {
		if !reflect.DeepEqual(Generate(Config{}, n), Generate(def, n)) {
			t.Fatalf("event %d: zero Config is not the defaults", n)
		}
	}
	// A golden check, so an accidental change of the stream shows.
	e := Generate(Config{}, 0)
	if e.Person == nil || e.Person.ID != 1000 || e.Person.DateTime != DefaultBaseTime.UnixMilli() {
		t.Fatalf("event 0 = %+v", e.Person)
	}
}

func TestIDs(t *testing.T) {
	const events = 200_000
	cfg := Config{}.withDefaults()
	var lastPerson, lastAuction int64 = FirstPersonID - 1, FirstAuctionID - 1
	var hotAuction, hotBidder, bids int
	for n := range int64(events) {
		e := Generate(Config{}, n)
		switch e.Kind {
		case KindPerson:
			if e.Person.ID != lastPerson+1 {
				t.Fatalf("event %d: person %d after person %d", n, e.Person.ID, lastPerson)
			}
			lastPerson = e.Person.ID
		case KindAuction:
			a := e.Auction
			if a.ID != lastAuction+1 {
				t.Fatalf("event %d: auction %d after auction %d", n, a.ID, lastAuction)
			}
			lastAuction = a.ID
			// Sellers are people created or at most personIDLead ahead,
			// within the active window.
			if a.Seller > lastPerson+personIDLead || a.Seller < max(lastPerson-int64(cfg.NumActivePeople)-hotSellerBatch, FirstPersonID) {
				t.Fatalf("event %d: seller %d, last person %d", n, a.Seller, lastPerson)
			}
			if a.Category < FirstCategoryID || a.Category >= FirstCategoryID+NumCategories {
				t.Fatalf("event %d: category %d", n, a.Category)
			}
			if a.InitialBid < 100 || a.Reserve <= a.InitialBid || a.Expires <= a.DateTime {
				t.Fatalf("event %d: auction %+v", n, a)
			}
		case KindBid:
			b := e.Bid
			bids++
			// Bids are for auctions in flight: among the
			// NumInFlightAuctions newest or at most auctionIDLead ahead.
			if b.Auction > lastAuction+auctionIDLead || b.Auction < max(lastAuction-int64(cfg.NumInFlightAuctions), FirstAuctionID) {
				t.Fatalf("event %d: bid for auction %d, last auction %d", n, b.Auction, lastAuction)
			}
			if b.Bidder > lastPerson+personIDLead || b.Bidder < max(lastPerson-int64(cfg.NumActivePeople), FirstPersonID) {
				t.Fatalf("event %d: bidder %d, last person %d", n, b.Bidder, lastPerson)
			}
			if b.Auction == (lastAuction-FirstAuctionID)/hotAuctionBatch*hotAuctionBatch+FirstAuctionID {
				hotAuction++
			}
			if b.Bidder == (lastPerson-FirstPersonID)/hotBidderBatch*hotBidderBatch+1+FirstPersonID {
				hotBidder++
			}
			if b.Price < 100 || b.Price > 100_000_000 || b.Channel == "" || !strings.HasPrefix(b.URL, "https://www.nexmark.com/") {
				t.Fatalf("event %d: bid %+v", n, b)
			}
		}
	}
	// Hot picks: 1 − 1/2 of the auctions and 1 − 1/4 of the bidders, plus
	// the random picks that land on the hot one.
	if f := float64(hotAuction) / float64(bids); f < 0.49 || f > 0.52 {
		t.Errorf("%.3f of bids for the hot auction, want about 0.5", f)
	}
	if f := float64(hotBidder) / float64(bids); f < 0.74 || f > 0.77 {
		t.Errorf("%.3f of bids by the hot bidder, want about 0.75", f)
	}
}

func TestDateTimeMonotone(t *testing.T) {
	for _, rate := range []float64{1, 3, 10000, 7919.3, 1e6} {
		cfg := Config{FirstEventRate: rate}
		prev := int64(math.MinInt64)
		for n := range int64(20000) {
			ts := Generate(cfg, n).DateTime()
			if ts < prev {
				t.Fatalf("rate %v: event %d at %d before event %d at %d", rate, n, ts, n-1, prev)
			}
			if ts != cfg.Timestamp(n) {
				t.Fatalf("rate %v: event %d at %d, Timestamp says %d", rate, n, ts, cfg.Timestamp(n))
			}
			prev = ts
		}
	}
	// 10,000 events/s: event n is n/10 ms after the base time.
	base := DefaultBaseTime.UnixMilli()
	for _, n := range []int64{0, 9, 10, 12345, 1e9} {
		if got := (Config{}).Timestamp(n); got != base+n/10 {
			t.Fatalf("Timestamp(%d) = base%+d, want base%+d", n, got-base, n/10)
		}
	}
	bt := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if got := Generate(Config{BaseTime: bt, FirstEventRate: 1000}, 5000).DateTime(); got != bt.UnixMilli()+5000 {
		t.Fatalf("event 5000 at 1000/s from %v: %d", bt, got)
	}
}

func TestSizes(t *testing.T) {
	var sum, count [4]float64
	for n := range int64(100_000) {
		e := Generate(Config{}, n)
		var size int
		switch e.Kind {
		case KindPerson:
			size = PersonBaseSize(e.Person) + len(e.Person.Extra)
		case KindAuction:
			size = AuctionBaseSize(e.Auction) + len(e.Auction.Extra)
		case KindBid:
			size = BidBaseSize + len(e.Bid.Extra)
		}
		sum[e.Kind] += float64(size)
		count[e.Kind]++
	}
	for k, want := range map[Kind]float64{KindPerson: 200, KindAuction: 500, KindBid: 100} {
		if avg := sum[k] / count[k]; math.Abs(avg-want) > want*0.02 {
			t.Errorf("%v: average size %.1f, want %.0f", k, avg, want)
		}
	}
}

func TestPrices(t *testing.T) {
	// Log-uniform over [100, 10^8): about a sixth per decade.
	var decades [6]int
	const n = 60_000
	r := newRNG(1)
	for range n {
		p := nextPrice(&r)
		d := int(math.Log10(float64(p))) - 2
		if d < 0 || d > 5 && p != 100_000_000 {
			t.Fatalf("price %d out of range", p)
		}
		decades[min(d, 5)]++
	}
	for d, c := range decades {
		if c < n/6*9/10 || c > n/6*11/10 {
			t.Errorf("decade %d holds %d of %d prices", d, c, n)
		}
	}
}

func TestRNG(t *testing.T) {
	r := newRNG(42)
	var hist [7]int
	for range 70_000 {
		v := r.intn(7)
		if v < 0 || v >= 7 {
			t.Fatalf("intn(7) = %d", v)
		}
		hist[v]++
	}
	for v, c := range hist {
		if c < 9500 || c > 10500 {
			t.Errorf("intn(7) gave %d %d times of 70000", v, c)
		}
	}
	for _, bound := range []int32{1, 2, 16, math.MaxInt32} {
		for range 1000 {
			if v := r.intn(bound); v < 0 || v >= bound {
				t.Fatalf("intn(%d) = %d", bound, v)
			}
		}
	}
	for _, n := range []int64{1, 5, math.MaxInt32, math.MaxInt64} {
		for range 1000 {
			if v := r.int64n(n); v < 0 || v >= n {
				t.Fatalf("int64n(%d) = %d", n, v)
			}
		}
	}
	for range 1000 {
		if f := r.float64(); f < 0 || f >= 1 {
			t.Fatalf("float64() = %v", f)
		}
	}
}

func TestStrings(t *testing.T) {
	r := newRNG(7)
	for range 1000 {
		s := nextString(&r, 20, ' ')
		if len(s) > 19 || strings.TrimSpace(s) != s {
			t.Fatalf("nextString(20) = %q", s)
		}
	}
	e := Generate(Config{}, 0).Person
	if !strings.Contains(e.EmailAddress, "@") || !strings.HasSuffix(e.EmailAddress, ".com") || len(e.CreditCard) != 19 {
		t.Fatalf("person %+v", e)
	}
	ch := channels()
	if ch.names[42] != "channel-42" || !strings.HasPrefix(ch.urls[42], "https://www.nexmark.com/") {
		t.Fatalf("channel 42: %q %q", ch.names[42], ch.urls[42])
	}
	if s := nextExactString(&r, paddingLength/2+1); len(s) != paddingLength/2+1 {
		t.Fatalf("long exact string of %d", len(s))
	}
}

func TestValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{
		{FirstEventRate: -1}, {FirstEventRate: math.NaN()}, {HotAuctionRatio: -1},
		{NumActivePeople: -3}, {AvgBidByteSize: maxAvgByteSize + 1}, {USStates: []string{"or", ""}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// USStates: the default list is the Java suites'; a configured one is drawn
// from instead, the people otherwise a pure function of n and the config.
func TestUSStates(t *testing.T) {
	if got := DefaultUSStates(); !slices.Equal(got, []string{"AZ", "CA", "ID", "OR", "WA", "WY"}) {
		t.Fatalf("default states %q", got)
	}
	lower := Config{USStates: []string{"az", "ca", "id", "or", "wa", "wy"}}
	one := Config{USStates: []string{"or"}}
	seen := map[string]bool{}
	for n := int64(0); n < 50*600; n += 50 {
		def, explicit := Generate(Config{}, n), Generate(Config{USStates: DefaultUSStates()}, n)
		if !reflect.DeepEqual(def, explicit) {
			t.Fatalf("event %d: the default list given explicitly differs", n)
		}
		l := Generate(lower, n)
		// Same length: the same draws, so the same person in lower case.
		if want := *def.Person; l.Person.State != strings.ToLower(want.State) {
			t.Fatalf("event %d: state %q, default %q", n, l.Person.State, want.State)
		} else {
			want.State = l.Person.State
			if !reflect.DeepEqual(*l.Person, want) {
				t.Fatalf("event %d: %+v, want %+v", n, *l.Person, want)
			}
		}
		seen[l.Person.State] = true
		if p := Generate(one, n).Person; p.State != "or" || !reflect.DeepEqual(Generate(one, n), Generate(one, n)) {
			t.Fatalf("event %d: %+v", n, p)
		}
	}
	if len(seen) != 6 {
		t.Fatalf("states drawn: %v", seen)
	}
}

func BenchmarkGenerate(b *testing.B) {
	b.ReportAllocs()
	for i := range b.N {
		Generate(Config{}, int64(i))
	}
}
