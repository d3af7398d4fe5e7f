package nexmarksql

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirproject/weir/internal/nexmark"
)

// The oracles of the updating queries (UpdatingNames) give their final
// results: what each returns as a batch query over all the events. Their
// types are PostgreSQL's as Weir resolves them (internal/sql/compile,
// aggType): count is BIGINT; min and max of BIGINT BIGINT; sum of BIGINT
// NUMERIC of scale 0 (printed as an integer); avg of BIGINT NUMERIC of
// scale 6, rounded half away from zero (ops.ratio), so an average of 3
// and 4 prints 3.500000; ROW_NUMBER BIGINT.

// avgScaled is sum/n at the given scale, unscaled (sum/n·10^scale),
// rounded half away from zero, as PostgreSQL rounds a NUMERIC.
func avgScaled(sum, n int64, scale int) int64 {
	num := new(big.Int).Mul(big.NewInt(sum), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	den := big.NewInt(n)
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if r.Lsh(r.Abs(r), 1).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(int64(num.Sign())))
	}
	return q.Int64()
}

// day is to_char(date_time, 'YYYY-MM-DD') of a time in ms.
func day(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02") }

// joinedBids reads auctions and bids and pairs them as q4's and q9's join
// does: A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
// (both ends included), whichever came first. It returns the auctions by
// id and each one's qualifying bids, in event order.
func joinedBids(events iter.Seq[nexmark.Event]) (map[int64]*nexmark.Auction, map[int64][]*nexmark.Bid) {
	auctions := map[int64]*nexmark.Auction{}
	var all []*nexmark.Bid
	for e := range events {
		switch {
		case e.Auction != nil:
			auctions[e.Auction.ID] = e.Auction
		case e.Bid != nil:
			all = append(all, e.Bid)
		}
	}
	bids := map[int64][]*nexmark.Bid{}
	for _, b := range all {
		if a := auctions[b.Auction]; a != nil && a.DateTime <= b.DateTime && b.DateTime <= a.Expires {
			bids[a.ID] = append(bids[a.ID], b)
		}
	}
	return auctions, bids
}

// q4 is the average, per category, of the highest qualifying bid of each
// auction (joinedBids) that has one: category, avg (NUMERIC, scale 6).
func q4(events iter.Seq[nexmark.Event]) []string {
	auctions, bids := joinedBids(events)
	type acc struct{ sum, n int64 }
	per := map[int64]*acc{}
	for id, bs := range bids {
		top := bs[0].Price
		for _, b := range bs {
			top = max(top, b.Price)
		}
		cat := auctions[id].Category
		a := per[cat]
		if a == nil {
			a = &acc{}
			per[cat] = a
		}
		a.sum += top
		a.n++
	}
	var out []string
	var r row
	for cat, a := range per {
		out = append(out, r.reset().i64(cat).num(avgScaled(a.sum, a.n, 6), 6).String())
	}
	return out
}

// q6Win is an auction's row of q6's Q: its lowest qualifying price, and
// the dates its winning bid may have (sorted, distinct): more than one
// when bids tie on that price, which ROW_NUMBER ranks arbitrarily.
type q6Win struct {
	price int64
	dates []int64
}

// q6Wins are the rows of q6's Q per seller.
func q6Wins(events iter.Seq[nexmark.Event]) map[int64][]q6Win {
	auctions, bids := joinedBids(events)
	per := map[int64][]q6Win{}
	for id, bs := range bids {
		w := q6Win{price: bs[0].Price}
		for _, b := range bs {
			switch {
			case b.Price < w.price:
				w = q6Win{price: b.Price, dates: []int64{b.DateTime}}
			case b.Price == w.price:
				w.dates = append(w.dates, b.DateTime)
			}
		}
		slices.Sort(w.dates)
		w.dates = slices.Compact(w.dates)
		seller := auctions[id].Seller
		per[seller] = append(per[seller], w)
	}
	return per
}

// q6Lines are q6's rows of one seller whose auctions' winning bids have
// the dates pick chooses (an index into each win's dates): per row of Q,
// in the order of date_time (then price: the operator orders rows equal
// in ORDER BY by all their values), the seller and the average price of
// it and the 10 rows before it (NUMERIC, scale 6).
func q6Lines(r *row, seller int64, wins []q6Win, pick []int) []string {
	type qrow struct{ date, price int64 }
	rows := make([]qrow, len(wins))
	for i, w := range wins {
		rows[i] = qrow{w.dates[pick[i]], w.price}
	}
	slices.SortFunc(rows, func(a, b qrow) int {
		return cmp.Or(cmp.Compare(a.date, b.date), cmp.Compare(a.price, b.price))
	})
	out := make([]string, len(rows))
	for i := range rows {
		var sum int64
		from := max(0, i-10)
		for _, q := range rows[from : i+1] {
			sum += q.price
		}
		out[i] = r.reset().i64(seller).num(avgScaled(sum, int64(i+1-from), 6), 6).String()
	}
	return out
}

// q6 is, per seller with auctions that have a qualifying bid
// (joinedBids), a row per such auction: the seller and the average of
// the lowest qualifying prices of that auction and the seller's 10
// before it by the winning bid's date (q6Lines); of bids tied on the
// lowest price, the earliest is taken here.
func q6(events iter.Seq[nexmark.Event]) []string {
	var out []string
	var r row
	for seller, wins := range q6Wins(events) {
		out = append(out, q6Lines(&r, seller, wins, make([]int, len(wins)))...)
	}
	return out
}

// maxQ6Choices bounds the choices of tied winning bids checkQ6 tries per
// seller; past it, only the seller's row count is checked.
const maxQ6Choices = 1 << 12

// checkQ6: per seller, the rows must be q6Lines of one choice of each
// auction's tied winning bids, and no rows of other sellers.
func checkQ6(events iter.Seq[nexmark.Event], p *problems, got []string) {
	bySeller := map[int64][]string{}
	for _, l := range got {
		f := splitCSV(l)
		seller, err := strconv.ParseInt(f[0], 10, 64)
		if len(f) != 2 || err != nil {
			p.add("row %q is not a seller and an average", l)
			continue
		}
		bySeller[seller] = append(bySeller[seller], l)
	}
	var r row
	for seller, wins := range q6Wins(events) {
		have := slices.Sorted(slices.Values(bySeller[seller]))
		delete(bySeller, seller)
		choices := 1
		for _, w := range wins {
			choices = min(choices*len(w.dates), maxQ6Choices+1)
		}
		pick := make([]int, len(wins))
		if choices > maxQ6Choices {
			if len(have) != len(wins) {
				p.add("seller %d: %d rows, want %d", seller, len(have), len(wins))
			}
			continue
		}
		var first []string
		for {
			want := q6Lines(&r, seller, wins, pick)
			slices.Sort(want)
			if first == nil {
				first = want
			}
			if slices.Equal(have, want) {
				break
			}
			// The next choice, as an odometer.
			i := 0
			for ; i < len(pick); i++ {
				if pick[i]++; pick[i] < len(wins[i].dates) {
					break
				}
				pick[i] = 0
			}
			if i == len(pick) {
				diffLines(p, have, first)
				break
			}
		}
	}
	for seller, ls := range bySeller {
		p.add("unexpected rows of seller %d, who has no auction with a qualifying bid: %q", seller, ls)
	}
}

// q9Before reports whether bid b ranks before c in q9's ORDER BY B.price
// DESC, B.date_time ASC.
func q9Before(b, c *nexmark.Bid) bool {
	return b.Price > c.Price || b.Price == c.Price && b.DateTime < c.DateTime
}

// q9Line is q9's row of auction a and its bid b: the auction's columns
// but extra, then auction, bidder, price, bid_date_time.
func q9Line(r *row, a *nexmark.Auction, b *nexmark.Bid) string {
	r.reset().i64(a.ID).text(a.ItemName).text(a.Description).i64(a.InitialBid).i64(a.Reserve).
		ts(a.DateTime).ts(a.Expires).i64(a.Seller).i64(a.Category)
	return r.i64(b.Auction).i64(b.Bidder).i64(b.Price).ts(b.DateTime).String()
}

// q9 is, per auction with a qualifying bid (joinedBids), the auction and
// its winning bid: the highest price, then the earliest; bids equal in
// both tie, and the first in event order is taken here.
func q9(events iter.Seq[nexmark.Event]) []string {
	auctions, bids := joinedBids(events)
	var out []string
	var r row
	for id, bs := range bids {
		best := bs[0]
		for _, b := range bs[1:] {
			if q9Before(b, best) {
				best = b
			}
		}
		out = append(out, q9Line(&r, auctions[id], best))
	}
	return out
}

// priceRank is the bucket of q15–q17's FILTERs a price falls in: 1 below
// 10,000, 2 below 1,000,000, else 3.
func priceRank(price int64) int {
	switch {
	case price < 10000:
		return 1
	case price < 1000000:
		return 2
	}
	return 3
}

// bidCounts are q15's and q16's twelve counts of a group: bids, distinct
// bidders and distinct auctions, in all and per price rank.
type bidCounts struct {
	bids     [4]int64
	bidders  [4]map[int64]bool
	auctions [4]map[int64]bool
}

func (c *bidCounts) add(b *nexmark.Bid) {
	for _, i := range []int{0, priceRank(b.Price)} {
		c.bids[i]++
		if c.bidders[i] == nil {
			c.bidders[i], c.auctions[i] = map[int64]bool{}, map[int64]bool{}
		}
		c.bidders[i][b.Bidder] = true
		c.auctions[i][b.Auction] = true
	}
}

func (c *bidCounts) write(r *row) {
	for _, n := range c.bids {
		r.i64(n)
	}
	for _, m := range c.bidders {
		r.i64(int64(len(m)))
	}
	for _, m := range c.auctions {
		r.i64(int64(len(m)))
	}
}

// q15 is the twelve counts per day of bids (bucketed by price: below
// 10,000, below 1,000,000, the rest): day, then total_bids, rank1 … 3
// bids, total_bidders, rank1 … 3 bidders, total_auctions, rank1 … 3
// auctions.
func q15(events iter.Seq[nexmark.Event]) []string {
	per := map[string]*bidCounts{}
	for e := range events {
		if b := e.Bid; b != nil {
			d := day(b.DateTime)
			if per[d] == nil {
				per[d] = &bidCounts{}
			}
			per[d].add(b)
		}
	}
	var out []string
	var r row
	for d, c := range per {
		r.reset().text(d)
		c.write(&r)
		out = append(out, r.String())
	}
	return out
}

// hh12Month is to_char(t, 'HH:mm') as PostgreSQL computes it: HH is the
// hour of the 12-hour clock (01–12, midnight 12) and mm, the patterns
// being caseless, is MM, the month (01–12), not the minute.
func hh12Month(ms int64) string {
	t := time.UnixMilli(ms).UTC()
	h := t.Hour() % 12
	if h == 0 {
		h = 12
	}
	return fmt.Sprintf("%02d:%02d", h, int(t.Month()))
}

// q16 is q15 per channel and day, with the greatest to_char(date_time,
// 'HH:mm') of the group (hh12Month; strings compared bytewise): channel,
// day, minute, then q15's twelve counts.
func q16(events iter.Seq[nexmark.Event]) []string {
	type key struct{ channel, day string }
	type acc struct {
		bidCounts
		minute string
	}
	per := map[key]*acc{}
	for e := range events {
		if b := e.Bid; b != nil {
			k := key{b.Channel, day(b.DateTime)}
			a := per[k]
			if a == nil {
				a = &acc{}
				per[k] = a
			}
			a.add(b)
			a.minute = max(a.minute, hh12Month(b.DateTime))
		}
	}
	var out []string
	var r row
	for k, a := range per {
		r.reset().text(k.channel).text(k.day).text(a.minute)
		a.write(&r)
		out = append(out, r.String())
	}
	return out
}

// q17 is per auction and day: auction, day, total_bids, rank1 … 3 bids
// (q15's buckets), min_price, max_price (BIGINT), avg_price (NUMERIC,
// scale 6) and sum_price (NUMERIC, scale 0).
func q17(events iter.Seq[nexmark.Event]) []string {
	type key struct {
		auction int64
		day     string
	}
	type acc struct {
		bids          [4]int64
		min, max, sum int64
	}
	per := map[key]*acc{}
	for e := range events {
		if b := e.Bid; b != nil {
			k := key{b.Auction, day(b.DateTime)}
			a := per[k]
			if a == nil {
				a = &acc{min: b.Price, max: b.Price}
				per[k] = a
			}
			a.bids[0]++
			a.bids[priceRank(b.Price)]++
			a.min, a.max = min(a.min, b.Price), max(a.max, b.Price)
			a.sum += b.Price
		}
	}
	var out []string
	var r row
	for k, a := range per {
		r.reset().i64(k.auction).text(k.day)
		for _, n := range a.bids {
			r.i64(n)
		}
		r.i64(a.min).i64(a.max).num(avgScaled(a.sum, a.bids[0], 6), 6).num(a.sum, 0)
		out = append(out, r.String())
	}
	return out
}

// q18Line is q18's row of bid b: auction, bidder, price, channel, url,
// date_time.
func q18Line(r *row, b *nexmark.Bid) string {
	return r.reset().i64(b.Auction).i64(b.Bidder).i64(b.Price).text(b.Channel).text(b.URL).ts(b.DateTime).String()
}

// q18 is each bidder's latest bid on each auction they bid on; bids of a
// pair at the same latest time tie, and the first in event order is
// taken here.
func q18(events iter.Seq[nexmark.Event]) []string {
	type key struct{ bidder, auction int64 }
	last := map[key]*nexmark.Bid{}
	for e := range events {
		if b := e.Bid; b != nil {
			k := key{b.Bidder, b.Auction}
			if c := last[k]; c == nil || b.DateTime > c.DateTime {
				last[k] = b
			}
		}
	}
	var out []string
	var r row
	for _, b := range last {
		out = append(out, q18Line(&r, b))
	}
	return out
}

// bidLine is a bid's row, all its columns: auction, bidder, price,
// channel, url, date_time, extra.
func bidLine(r *row, b *nexmark.Bid) string {
	return r.reset().i64(b.Auction).i64(b.Bidder).i64(b.Price).text(b.Channel).text(b.URL).ts(b.DateTime).text(b.Extra).String()
}

// q19Top is how many bids of an auction q19 keeps.
const q19Top = 10

// q19 is each auction's ten highest bids (all if fewer), each with its
// rank: bid's columns, then rank_number (1 … 10). Bids of equal price
// tie; they are ranked in event order here.
func q19(events iter.Seq[nexmark.Event]) []string {
	per := map[int64][]*nexmark.Bid{}
	for e := range events {
		if b := e.Bid; b != nil {
			per[b.Auction] = append(per[b.Auction], b)
		}
	}
	var out []string
	var r row
	for _, bs := range per {
		slices.SortStableFunc(bs, func(a, b *nexmark.Bid) int { return cmp.Compare(b.Price, a.Price) })
		for i, b := range bs[:min(len(bs), q19Top)] {
			bidLine(&r, b)
			out = append(out, r.i64(int64(i+1)).String())
		}
	}
	return out
}

// CheckFinal checks got, the final result of updating query q (q in
// UpdatingNames) over events 0 … events−1 of the stream cfg describes
// (Oracle's arguments) as CSV lines in the SELECT's column order, in any
// order: a replayed changelog's rows. Where the result is determined (q4,
// q15, q16, q17) got must be Oracle's lines; where ROW_NUMBER ranks ties
// it must be one of the results a correct ROW_NUMBER gives:
//   - q6: per seller, q6's rows for one choice of each auction's winning
//     bid among its qualifying bids of the lowest price (rows without a
//     key: a multiset);
//   - q9: per auction with a qualifying bid, the auction and one of its
//     qualifying bids of the highest price and, among those, the
//     earliest;
//   - q18: per (bidder, auction) pair, one of the pair's bids of the
//     latest date_time;
//   - q19: per auction, ranks 1 … min(10, its bids), each once; the
//     prices by rank are the auction's highest, in descending order; and
//     each row is a bid of the auction, no bid taken more often than the
//     stream has it (bids are told apart by all their columns).
//
// Each key (Key(q)) must be there once, no other (q6 has none). The error lists the
// first differences found.
func CheckFinal(q string, cfg nexmark.Config, events int64, got []string) error {
	if !slices.Contains(UpdatingNames, q) {
		return fmt.Errorf("nexmarksql: %q is not an updating query (have %v)", q, UpdatingNames)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if events < 0 {
		return fmt.Errorf("nexmarksql: negative event count %d", events)
	}
	return checkFinal(q, generate(withStates(cfg), events, oracles[q].kinds), got)
}

// keyColumns are the columns of Key(q) in q's output.
var keyColumns = map[string][]int{
	"q4": {0}, "q6": nil, "q9": {0}, "q15": {0}, "q16": {0, 1}, "q17": {0, 1}, "q18": {1, 0}, "q19": {0, 7},
}

// checkers check the queries whose results have ties.
var checkers = map[string]func(events iter.Seq[nexmark.Event], p *problems, got []string){
	"q6":  checkQ6,
	"q9":  checkQ9,
	"q18": checkQ18,
	"q19": checkQ19,
}

func checkFinal(q string, events iter.Seq[nexmark.Event], got []string) error {
	p := &problems{query: q}
	if c := checkers[q]; c != nil {
		c(events, p, got)
		return p.err()
	}
	want := oracles[q].run(events)
	slices.Sort(want)
	got = slices.Sorted(slices.Values(got))
	seen := map[string]string{}
	for _, l := range got {
		if k, ok := keyOf(l, keyColumns[q]...); ok {
			if prev, ok := seen[k]; ok {
				p.add("key (%s) twice: %q and %q", k, prev, l)
			}
			seen[k] = l
		}
	}
	diffLines(p, got, want)
	return p.err()
}

// maxProblems is how many problems an error lists.
const maxProblems = 10

// problems collects what a check finds wrong.
type problems struct {
	query string
	list  []string
	n     int
}

func (p *problems) add(format string, args ...any) {
	p.n++
	if len(p.list) < maxProblems {
		p.list = append(p.list, fmt.Sprintf(format, args...))
	}
}

func (p *problems) err() error {
	if p.n == 0 {
		return nil
	}
	var b strings.Builder
	plural := "s"
	if p.n == 1 {
		plural = ""
	}
	fmt.Fprintf(&b, "%s: %d problem%s in the final result", p.query, p.n, plural)
	if p.n > len(p.list) {
		fmt.Fprintf(&b, " (the first %d)", len(p.list))
	}
	b.WriteString(":")
	for _, s := range p.list {
		b.WriteString("\n\t")
		b.WriteString(s)
	}
	return errors.New(b.String())
}

// diffLines reports the lines of got (sorted) that want (sorted) has not
// and the reverse, duplicates counted.
func diffLines(p *problems, got, want []string) {
	i, j := 0, 0
	for i < len(got) || j < len(want) {
		switch {
		case j == len(want) || i < len(got) && got[i] < want[j]:
			p.add("unexpected row %q", got[i])
			i++
		case i == len(got) || want[j] < got[i]:
			p.add("missing row %q", want[j])
			j++
		default:
			i++
			j++
		}
	}
}

// splitCSV splits a line of CSV into its fields, unquoted.
func splitCSV(line string) []string {
	var fields []string
	for {
		if !strings.HasPrefix(line, `"`) {
			i := strings.IndexByte(line, ',')
			if i < 0 {
				return append(fields, line)
			}
			fields = append(fields, line[:i])
			line = line[i+1:]
			continue
		}
		var b strings.Builder
		line = line[1:]
		for {
			i := strings.IndexByte(line, '"')
			if i < 0 { // unterminated: the rest
				b.WriteString(line)
				return append(fields, b.String())
			}
			b.WriteString(line[:i])
			line = line[i+1:]
			if strings.HasPrefix(line, `"`) {
				b.WriteByte('"')
				line = line[1:]
				continue
			}
			break
		}
		fields = append(fields, b.String())
		if !strings.HasPrefix(line, ",") {
			return fields
		}
		line = line[1:]
	}
}

// keyOf is the key of a line, its fields at idx (which it must have).
func keyOf(line string, idx ...int) (string, bool) {
	f := splitCSV(line)
	var k []string
	for _, i := range idx {
		if i >= len(f) {
			return "", false
		}
		k = append(k, f[i])
	}
	return strings.Join(k, ","), true
}

// checkOnePerKey checks that got has one line per key of valid, each one
// of the key's valid lines; the key of a line is its fields at idx.
func checkOnePerKey(p *problems, got []string, valid map[string]map[string]bool, columns int, idx ...int) {
	seen := map[string]string{}
	for _, l := range slices.Sorted(slices.Values(got)) {
		if n := len(splitCSV(l)); n != columns {
			p.add("row %q has %d columns, not %d", l, n, columns)
			continue
		}
		k, _ := keyOf(l, idx...)
		if prev, ok := seen[k]; ok {
			p.add("key (%s) twice: %q and %q", k, prev, l)
			continue
		}
		seen[k] = l
		switch vs := valid[k]; {
		case vs == nil:
			p.add("unexpected key (%s): %q", k, l)
		case !vs[l]:
			p.add("key (%s): row %q is none of the %d correct ones, e.g. %q", k, l, len(vs), slices.Min(slices.Collect(maps.Keys(vs))))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(valid)) {
		if _, ok := seen[k]; !ok {
			p.add("missing key (%s), e.g. %q", k, slices.Min(slices.Collect(maps.Keys(valid[k]))))
		}
	}
}

// checkQ9: per auction with a qualifying bid, the auction with any of its
// best bids (highest price, then earliest).
func checkQ9(events iter.Seq[nexmark.Event], p *problems, got []string) {
	auctions, bids := joinedBids(events)
	valid := map[string]map[string]bool{}
	var r row
	for id, bs := range bids {
		best := bs[0]
		for _, b := range bs[1:] {
			if q9Before(b, best) {
				best = b
			}
		}
		vs := map[string]bool{}
		for _, b := range bs {
			if !q9Before(best, b) {
				vs[q9Line(&r, auctions[id], b)] = true
			}
		}
		valid[strconv.FormatInt(id, 10)] = vs
	}
	checkOnePerKey(p, got, valid, 13, keyColumns["q9"]...)
}

// checkQ18: per (bidder, auction), any of the pair's latest bids.
func checkQ18(events iter.Seq[nexmark.Event], p *problems, got []string) {
	type key struct{ bidder, auction int64 }
	pairs := map[key][]*nexmark.Bid{}
	for e := range events {
		if b := e.Bid; b != nil {
			k := key{b.Bidder, b.Auction}
			switch bs := pairs[k]; {
			case len(bs) == 0 || b.DateTime > bs[0].DateTime:
				pairs[k] = []*nexmark.Bid{b}
			case b.DateTime == bs[0].DateTime:
				pairs[k] = append(bs, b)
			}
		}
	}
	valid := map[string]map[string]bool{}
	var r row
	for k, bs := range pairs {
		vs := map[string]bool{}
		for _, b := range bs {
			vs[q18Line(&r, b)] = true
		}
		valid[fmt.Sprintf("%d,%d", k.bidder, k.auction)] = vs
	}
	checkOnePerKey(p, got, valid, 6, keyColumns["q18"]...)
}

// checkQ19: per auction, the ranks 1 … min(10, bids) once each, their
// prices the auction's highest in order, each row a bid of the auction,
// no bid more often than the stream has it.
func checkQ19(events iter.Seq[nexmark.Event], p *problems, got []string) {
	type auction struct {
		bids   map[string]int // bidLine → how many such bids
		prices []int64
	}
	per := map[int64]*auction{}
	var r row
	for e := range events {
		if b := e.Bid; b != nil {
			a := per[b.Auction]
			if a == nil {
				a = &auction{bids: map[string]int{}}
				per[b.Auction] = a
			}
			a.bids[bidLine(&r, b)]++
			a.prices = append(a.prices, b.Price)
		}
	}
	type cell struct {
		auction int64
		rank    int
	}
	rows := map[cell]string{}
	for _, l := range slices.Sorted(slices.Values(got)) {
		f := splitCSV(l)
		if len(f) != 8 {
			p.add("row %q has %d columns, not 8", l, len(f))
			continue
		}
		id, err1 := strconv.ParseInt(f[0], 10, 64)
		rank, err2 := strconv.Atoi(f[7])
		if err1 != nil || err2 != nil {
			p.add("row %q: auction or rank_number not an integer", l)
			continue
		}
		c := cell{id, rank}
		if prev, ok := rows[c]; ok {
			p.add("key (%d,%d) twice: %q and %q", id, rank, prev, l)
			continue
		}
		rows[c] = l
		a := per[id]
		if a == nil {
			p.add("unexpected key (%d,%d): auction %d has no bids: %q", id, rank, id, l)
			continue
		}
		if k := min(len(a.prices), q19Top); rank < 1 || rank > k {
			p.add("unexpected key (%d,%d): auction %d has ranks 1 … %d: %q", id, rank, id, k, l)
			delete(rows, c)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(per)) {
		a := per[id]
		slices.SortFunc(a.prices, func(x, y int64) int { return cmp.Compare(y, x) })
		left := maps.Clone(a.bids)
		for rank := 1; rank <= min(len(a.prices), q19Top); rank++ {
			l, ok := rows[cell{id, rank}]
			if !ok {
				p.add("missing key (%d,%d): a bid of price %d", id, rank, a.prices[rank-1])
				continue
			}
			bid := l[:strings.LastIndexByte(l, ',')] // the rank is an integer: no comma, no quote
			price, _ := strconv.ParseInt(splitCSV(bid)[2], 10, 64)
			switch n, ok := left[bid]; {
			case !ok:
				p.add("key (%d,%d): %q is no bid of auction %d", id, rank, l, id)
			case n == 0:
				p.add("key (%d,%d): %q: the bid is taken more often than the stream has it (%d)", id, rank, l, a.bids[bid])
			case price != a.prices[rank-1]:
				p.add("key (%d,%d): %q has price %d, the auction's rank %d is %d", id, rank, l, price, rank, a.prices[rank-1])
			default:
				left[bid] = n - 1
			}
		}
	}
}
