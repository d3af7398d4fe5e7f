// Package nexmark generates the events of the Nexmark benchmark: people,
// auctions and bids of an online auction house, as the generators of the
// Nexmark suites for Flink (github.com/nexmark/nexmark,
// nexmark-flink/src/main/java/com/github/nexmark/flink/generator) and Beam
// (sdks/java/testing/nexmark/.../sources/generator) make them. Every rule
// below cites the Java file and method it follows; "Flink" is the former,
// "Beam" the latter, "both" when they agree.
//
// Event n (from 0) is a pure function of n and the Config: its kind comes
// from n mod 50, its ids from n, its random fields from a generator seeded
// with n, and its event time from n and the event rate. Any subset of the
// event numbers can therefore be generated independently, in any order, by
// any number of parallel readers, which is what the nexmark-source
// operator (Source) does.
package nexmark

import (
	"fmt"
	"math"
	"time"
)

// Kind is the kind of an event.
type Kind uint8

const (
	KindPerson  Kind = 1
	KindAuction Kind = 2
	KindBid     Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindPerson:
		return "person"
	case KindAuction:
		return "auction"
	case KindBid:
		return "bid"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Person is a new user of the auction house (Flink's model/Person.java).
// Times are milliseconds since the Unix epoch.
type Person struct {
	ID           int64
	Name         string
	EmailAddress string
	CreditCard   string
	City         string
	State        string
	DateTime     int64
	Extra        string
}

// Auction is an item put up for auction (Flink's model/Auction.java).
type Auction struct {
	ID          int64
	ItemName    string
	Description string
	InitialBid  int64
	Reserve     int64
	DateTime    int64
	Expires     int64
	Seller      int64 // a Person.ID
	Category    int64
	Extra       string
}

// Bid is a bid on an auction (Flink's model/Bid.java, with the channel and
// url Flink added to Beam's Bid).
type Bid struct {
	Auction  int64 // an Auction.ID
	Bidder   int64 // a Person.ID
	Price    int64
	Channel  string
	URL      string
	DateTime int64
	Extra    string
}

// Event is one generated event: Kind says which of Person, Auction and Bid
// is set (Flink's model/Event.java).
type Event struct {
	Kind    Kind
	Person  *Person
	Auction *Auction
	Bid     *Bid
}

// DateTime is the event's event time in milliseconds since the Unix epoch.
func (e Event) DateTime() int64 {
	switch {
	case e.Person != nil:
		return e.Person.DateTime
	case e.Auction != nil:
		return e.Auction.DateTime
	case e.Bid != nil:
		return e.Bid.DateTime
	}
	return 0
}

// Constants of both suites' GeneratorConfig.java and model generators.
const (
	FirstPersonID   = 1000 // GeneratorConfig.FIRST_PERSON_ID
	FirstAuctionID  = 1000 // GeneratorConfig.FIRST_AUCTION_ID
	FirstCategoryID = 10   // GeneratorConfig.FIRST_CATEGORY_ID
	NumCategories   = 5    // AuctionGenerator.NUM_CATEGORIES

	// Proportions of people, auctions and bids in every 50 events
	// (NexmarkConfiguration personProportion, auctionProportion,
	// bidProportion).
	PersonProportion  = 1
	AuctionProportion = 3
	BidProportion     = 46
	TotalProportion   = PersonProportion + AuctionProportion + BidProportion

	// personIDLead and auctionIDLead are how many not yet created people
	// and auctions a random pick may name (PersonGenerator.PERSON_ID_LEAD,
	// AuctionGenerator.AUCTION_ID_LEAD).
	personIDLead  = 10
	auctionIDLead = 10
	// The batch sizes of hot sellers, auctions and bidders: a hot pick is
	// the first (for bidders the second) of the last batch of this many
	// (AuctionGenerator.HOT_SELLER_RATIO, BidGenerator.HOT_AUCTION_RATIO,
	// BidGenerator.HOT_BIDDER_RATIO).
	hotSellerBatch  = 100
	hotAuctionBatch = 100
	hotBidderBatch  = 100
)

// DefaultBaseTime is the event time of event 0 unless configured: fixed, so
// a run's output is reproducible.
var DefaultBaseTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Config is what the generated events depend on. Zero fields take the
// defaults of NexmarkConfiguration.java (Flink), given in brackets.
type Config struct {
	// FirstEventRate is the event-time rate in events per second: event n
	// happens n/FirstEventRate seconds after BaseTime [10000].
	FirstEventRate float64
	// BaseTime is the event time of event 0 [DefaultBaseTime]. Event times
	// are whole milliseconds.
	BaseTime time.Time
	// HotAuctionRatio: a bid is for a hot auction with probability
	// 1 − 1/HotAuctionRatio [2].
	HotAuctionRatio int
	// HotBiddersRatio: a bid is by a hot bidder with probability
	// 1 − 1/HotBiddersRatio [4].
	HotBiddersRatio int
	// HotSellersRatio: an auction is by a hot seller with probability
	// 1 − 1/HotSellersRatio [4].
	HotSellersRatio int
	// NumInFlightAuctions is how many recent auctions a bid's random
	// auction is drawn from, and sets the auctions' lengths [100].
	NumInFlightAuctions int
	// NumActivePeople is how many recent people a random seller or bidder
	// is drawn from [1000].
	NumActivePeople int
	// The average sizes in bytes the extra field pads the events to
	// [200, 500, 100].
	AvgPersonByteSize, AvgAuctionByteSize, AvgBidByteSize int
	// USStates are the states a person lives in, one drawn uniformly
	// [PersonGenerator's AZ, CA, ID, OR, WA, WY]. RisingWave's generator
	// (nexmark-rs) takes the list as nexmark.us.states and writes it
	// lower-case; a list of another length draws differently and so
	// changes the rest of each person's random fields too.
	USStates []string
}

// DefaultUSStates is the states a person lives in unless configured
// (PersonGenerator.US_STATES, both suites).
func DefaultUSStates() []string { return append([]string(nil), usStates...) }

// maxAvgByteSize bounds the average sizes, so the extra field is always a
// slice of the shared padding text.
const maxAvgByteSize = 64 << 10

// Validate reports a config Generate cannot use: negative or out-of-range
// fields (zero fields take defaults).
func (c Config) Validate() error {
	switch {
	case c.FirstEventRate < 0 || math.IsNaN(c.FirstEventRate) || math.IsInf(c.FirstEventRate, 0):
		return fmt.Errorf("nexmark: first event rate must be a positive number of events/s, got %v", c.FirstEventRate)
	case c.HotAuctionRatio < 0 || c.HotBiddersRatio < 0 || c.HotSellersRatio < 0:
		return fmt.Errorf("nexmark: hot ratios must be positive (got auction %d, bidder %d, seller %d)", c.HotAuctionRatio, c.HotBiddersRatio, c.HotSellersRatio)
	case c.HotAuctionRatio > math.MaxInt32 || c.HotBiddersRatio > math.MaxInt32 || c.HotSellersRatio > math.MaxInt32:
		return fmt.Errorf("nexmark: hot ratios must be below 2^31")
	case c.NumInFlightAuctions < 0 || c.NumInFlightAuctions > math.MaxInt32 || c.NumActivePeople < 0 || c.NumActivePeople > math.MaxInt32:
		return fmt.Errorf("nexmark: in-flight auctions and active people must be in (0, 2^31)")
	case c.AvgPersonByteSize < 0 || c.AvgAuctionByteSize < 0 || c.AvgBidByteSize < 0 ||
		c.AvgPersonByteSize > maxAvgByteSize || c.AvgAuctionByteSize > maxAvgByteSize || c.AvgBidByteSize > maxAvgByteSize:
		return fmt.Errorf("nexmark: average byte sizes must be in (0, %d]", maxAvgByteSize)
	case len(c.USStates) > math.MaxInt32:
		return fmt.Errorf("nexmark: too many US states (%d)", len(c.USStates))
	}
	for _, s := range c.USStates {
		if s == "" {
			return fmt.Errorf("nexmark: US states must be non-empty, got %q", c.USStates)
		}
	}
	return nil
}

// withDefaults fills the zero (or, for an unvalidated config, negative)
// fields.
func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if !(c.FirstEventRate > 0) || math.IsInf(c.FirstEventRate, 0) {
		c.FirstEventRate = 10000
	}
	if c.BaseTime.IsZero() {
		c.BaseTime = DefaultBaseTime
	}
	def(&c.HotAuctionRatio, 2)
	def(&c.HotBiddersRatio, 4)
	def(&c.HotSellersRatio, 4)
	def(&c.NumInFlightAuctions, 100)
	def(&c.NumActivePeople, 1000)
	def(&c.AvgPersonByteSize, 200)
	def(&c.AvgAuctionByteSize, 500)
	def(&c.AvgBidByteSize, 100)
	c.HotAuctionRatio = min(c.HotAuctionRatio, math.MaxInt32)
	c.HotBiddersRatio = min(c.HotBiddersRatio, math.MaxInt32)
	c.HotSellersRatio = min(c.HotSellersRatio, math.MaxInt32)
	c.NumInFlightAuctions = min(c.NumInFlightAuctions, math.MaxInt32)
	c.NumActivePeople = min(c.NumActivePeople, math.MaxInt32)
	c.AvgPersonByteSize = min(c.AvgPersonByteSize, maxAvgByteSize)
	c.AvgAuctionByteSize = min(c.AvgAuctionByteSize, maxAvgByteSize)
	c.AvgBidByteSize = min(c.AvgBidByteSize, maxAvgByteSize)
	if len(c.USStates) == 0 || len(c.USStates) > math.MaxInt32 {
		c.USStates = usStates
	}
	return c
}

// KindOf is the kind of event n: by n mod 50, the first 1 a person, the next
// 3 auctions, the last 46 bids (both, NexmarkGenerator.nextEvent /
// Generator.nextEvent: "rem = newEventId % totalProportion").
func KindOf(n int64) Kind {
	switch rem := n % TotalProportion; {
	case rem < PersonProportion:
		return KindPerson
	case rem < PersonProportion+AuctionProportion:
		return KindAuction
	}
	return KindBid
}

// Timestamp is the event time of event n in milliseconds since the Unix
// epoch: GeneratorConfig.timestampForEvent (both), baseTime +
// (long)(n × interEventDelayUs) / 1000, with interEventDelayUs =
// 1,000,000 / firstEventRate × numEventGenerators. Weir numbers the events
// of all splits on one timeline (event n is the n-th of the whole stream,
// where each Java generator numbers its own), so numEventGenerators is 1
// and the whole stream runs at firstEventRate events/s of event time,
// whatever the number of splits. Monotone in n.
func (c Config) Timestamp(n int64) int64 {
	c = c.withDefaults()
	return c.timestamp(n)
}

func (c *Config) timestamp(n int64) int64 {
	delayUs := 1e6 / c.FirstEventRate
	return c.BaseTime.UnixMilli() + int64(float64(n)*delayUs)/1000
}

// Generate returns event n (n >= 0) of the stream cfg describes. It is
// pure: the same cfg and n give the same event.
func Generate(cfg Config, n int64) Event {
	c := cfg.withDefaults()
	r := newRNG(n)
	ts := c.timestamp(n)
	switch KindOf(n) {
	case KindPerson:
		return Event{Kind: KindPerson, Person: nextPerson(&c, n, &r, ts)}
	case KindAuction:
		return Event{Kind: KindAuction, Auction: nextAuction(&c, n, &r, ts)}
	}
	return Event{Kind: KindBid, Bid: nextBid(&c, n, &r, ts)}
}

// LastBase0PersonID is the id, less FirstPersonID, of the newest person at
// event n: n's own when n is a person (both,
// PersonGenerator.lastBase0PersonId).
func LastBase0PersonID(n int64) int64 {
	epoch, offset := n/TotalProportion, n%TotalProportion
	if offset >= PersonProportion {
		offset = PersonProportion - 1 // the last person of this epoch
	}
	return epoch*PersonProportion + offset
}

// LastBase0AuctionID is the id, less FirstAuctionID, of the newest auction
// at event n: n's own when n is an auction (both,
// AuctionGenerator.lastBase0AuctionId). It is −1 before the first auction.
func LastBase0AuctionID(n int64) int64 {
	epoch, offset := n/TotalProportion, n%TotalProportion
	switch {
	case offset < PersonProportion: // the last auction of the epoch before
		epoch--
		offset = AuctionProportion - 1
	case offset >= PersonProportion+AuctionProportion: // the last of this epoch
		offset = AuctionProportion - 1
	default:
		offset -= PersonProportion
	}
	return epoch*AuctionProportion + offset
}

// nextBase0PersonID picks one of the NumActivePeople newest people, or one
// of the next personIDLead not created yet (both,
// PersonGenerator.nextBase0PersonId).
func nextBase0PersonID(c *Config, n int64, r *rng) int64 {
	people := LastBase0PersonID(n) + 1
	active := min(people, int64(c.NumActivePeople))
	return people - active + r.int64n(active+personIDLead)
}

// nextBase0AuctionID picks one of the auctions likely still in flight (the
// NumInFlightAuctions newest) or of the next auctionIDLead (both,
// AuctionGenerator.nextBase0AuctionId).
func nextBase0AuctionID(c *Config, n int64, r *rng) int64 {
	last := LastBase0AuctionID(n)
	lo := max(last-int64(c.NumInFlightAuctions), 0)
	return lo + r.int64n(last-lo+1+auctionIDLead)
}

// nextPerson follows PersonGenerator.nextPerson (both): id from n, random
// name, email, credit card, city and state, and extra padding to
// AvgPersonByteSize.
func nextPerson(c *Config, n int64, r *rng, ts int64) *Person {
	p := &Person{ID: LastBase0PersonID(n) + FirstPersonID, DateTime: ts}
	p.Name = firstNames[r.intn(int32(len(firstNames)))] + " " + lastNames[r.intn(int32(len(lastNames)))]
	p.EmailAddress = nextString(r, 7, ' ') + "@" + nextString(r, 5, ' ') + ".com"
	p.CreditCard = nextCreditCard(r)
	p.City = usCities[r.intn(int32(len(usCities)))]
	p.State = c.USStates[r.intn(int32(len(c.USStates)))]
	p.Extra = nextExtra(r, PersonBaseSize(p), c.AvgPersonByteSize)
	return p
}

// PersonBaseSize is the size PersonGenerator.nextPerson counts before the
// extra field: 8 for the id plus the strings' lengths.
func PersonBaseSize(p *Person) int {
	return 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
}

// nextAuction follows AuctionGenerator.nextAuction (Flink's order of
// draws): id from n; a hot seller (the first of the last batch of 100
// people) with probability 1 − 1/HotSellersRatio, else a random active
// person; a category; the initial bid; the expiry; name and description;
// the reserve above the initial bid; the extra padding.
func nextAuction(c *Config, n int64, r *rng, ts int64) *Auction {
	a := &Auction{ID: LastBase0AuctionID(n) + FirstAuctionID, DateTime: ts}
	if r.intn(int32(c.HotSellersRatio)) > 0 {
		a.Seller = LastBase0PersonID(n) / hotSellerBatch * hotSellerBatch
	} else {
		a.Seller = nextBase0PersonID(c, n, r)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + int64(r.intn(NumCategories))
	a.InitialBid = nextPrice(r)
	a.Expires = ts + nextAuctionLengthMs(c, n, r, ts)
	a.ItemName = nextString(r, 20, ' ')
	a.Description = nextString(r, 100, ' ')
	a.Reserve = a.InitialBid + nextPrice(r)
	a.Extra = nextExtra(r, AuctionBaseSize(a), c.AvgAuctionByteSize)
	return a
}

// AuctionBaseSize is the size AuctionGenerator.nextAuction counts before
// the extra field: the strings and six longs.
func AuctionBaseSize(a *Auction) int { return 8 + len(a.ItemName) + len(a.Description) + 5*8 }

// nextAuctionLengthMs follows AuctionGenerator.nextAuctionLengthMs (both):
// an auction lasts 1 + uniform[0, 2·horizon) ms, horizon being the event
// time until NumInFlightAuctions more auctions have been created, so about
// that many are open at any time.
func nextAuctionLengthMs(c *Config, n int64, r *rng, ts int64) int64 {
	eventsForAuctions := int64(c.NumInFlightAuctions) * TotalProportion / AuctionProportion
	horizon := c.timestamp(n+eventsForAuctions) - ts
	return 1 + r.int64n(max(horizon*2, 1))
}

// nextBid follows BidGenerator.nextBid (Flink's, with channel and url): a
// hot auction (the first of the last batch of 100 auctions) with
// probability 1 − 1/HotAuctionRatio, else one in flight; a hot bidder (the
// second of the last batch of 100 people, so hot bidders and sellers
// differ) with probability 1 − 1/HotBiddersRatio, else an active person;
// the price; a hot channel with probability 1/2, else one of 10,000; the
// extra padding. Flink adds FIRST_PERSON_ID to the bidder twice (making
// every bidder 1000 above any person); this follows Beam's BidGenerator,
// which adds it once, so bidders are people.
func nextBid(c *Config, n int64, r *rng, ts int64) *Bid {
	b := &Bid{DateTime: ts}
	if r.intn(int32(c.HotAuctionRatio)) > 0 {
		b.Auction = LastBase0AuctionID(n) / hotAuctionBatch * hotAuctionBatch
	} else {
		b.Auction = nextBase0AuctionID(c, n, r)
	}
	b.Auction += FirstAuctionID
	if r.intn(int32(c.HotBiddersRatio)) > 0 {
		b.Bidder = LastBase0PersonID(n)/hotBidderBatch*hotBidderBatch + 1
	} else {
		b.Bidder = nextBase0PersonID(c, n, r)
	}
	b.Bidder += FirstPersonID
	b.Price = nextPrice(r)
	b.Channel, b.URL = nextChannel(r)
	b.Extra = nextExtra(r, BidBaseSize, c.AvgBidByteSize)
	return b
}

// BidBaseSize is the size BidGenerator.nextBid counts before the extra
// field: four longs (it leaves out channel and url).
const BidBaseSize = 4 * 8

// nextPrice is PriceGenerator.nextPrice (both): round(10^(u·6) · 100) for
// u uniform in [0, 1), so prices (in cents) are log-uniform in [100, 10^8).
func nextPrice(r *rng) int64 {
	return int64(math.Round(math.Pow(10, r.float64()*6) * 100))
}
