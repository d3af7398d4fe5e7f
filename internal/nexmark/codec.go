package nexmark

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// The binary encoding of an event, the value of a nexmark-source record:
//
//	kind    1 byte: 1 person, 2 auction, 3 bid
//	fields  in the order of the struct, int64s as zig-zag varints
//	        (encoding/binary.AppendVarint), strings as a uvarint length and
//	        the bytes; an auction's Expires as Expires − DateTime.
//
// Nothing follows the last field.

// ErrCorrupt is returned (wrapped) by Decode for bytes that are not an
// encoded event.
var ErrCorrupt = errors.New("nexmark: corrupt event encoding")

// AppendEncode appends the encoding of e to b.
func AppendEncode(b []byte, e Event) []byte {
	switch {
	case e.Kind == KindPerson && e.Person != nil:
		p := e.Person
		b = append(b, byte(KindPerson))
		b = binary.AppendVarint(b, p.ID)
		b = appendString(b, p.Name)
		b = appendString(b, p.EmailAddress)
		b = appendString(b, p.CreditCard)
		b = appendString(b, p.City)
		b = appendString(b, p.State)
		b = binary.AppendVarint(b, p.DateTime)
		return appendString(b, p.Extra)
	case e.Kind == KindAuction && e.Auction != nil:
		a := e.Auction
		b = append(b, byte(KindAuction))
		b = binary.AppendVarint(b, a.ID)
		b = appendString(b, a.ItemName)
		b = appendString(b, a.Description)
		b = binary.AppendVarint(b, a.InitialBid)
		b = binary.AppendVarint(b, a.Reserve)
		b = binary.AppendVarint(b, a.DateTime)
		b = binary.AppendVarint(b, a.Expires-a.DateTime)
		b = binary.AppendVarint(b, a.Seller)
		b = binary.AppendVarint(b, a.Category)
		return appendString(b, a.Extra)
	case e.Kind == KindBid && e.Bid != nil:
		d := e.Bid
		b = append(b, byte(KindBid))
		b = binary.AppendVarint(b, d.Auction)
		b = binary.AppendVarint(b, d.Bidder)
		b = binary.AppendVarint(b, d.Price)
		b = appendString(b, d.Channel)
		b = appendString(b, d.URL)
		b = binary.AppendVarint(b, d.DateTime)
		return appendString(b, d.Extra)
	}
	panic(fmt.Sprintf("nexmark: AppendEncode of an event of kind %v without its %v", e.Kind, e.Kind))
}

// AppendCSV appends e's fields to b as text, comma-separated, in the
// order of its struct (the kind is not written): a line for a file.
func AppendCSV(b []byte, e Event) []byte {
	str := func(b []byte, s string) []byte { return append(append(b, ','), s...) }
	num := func(b []byte, v int64) []byte { return strconv.AppendInt(append(b, ','), v, 10) }
	switch {
	case e.Kind == KindPerson && e.Person != nil:
		p := e.Person
		b = strconv.AppendInt(b, p.ID, 10)
		b = str(str(str(str(str(b, p.Name), p.EmailAddress), p.CreditCard), p.City), p.State)
		return str(num(b, p.DateTime), p.Extra)
	case e.Kind == KindAuction && e.Auction != nil:
		a := e.Auction
		b = str(str(strconv.AppendInt(b, a.ID, 10), a.ItemName), a.Description)
		b = num(num(num(num(num(num(b, a.InitialBid), a.Reserve), a.DateTime), a.Expires), a.Seller), a.Category)
		return str(b, a.Extra)
	case e.Kind == KindBid && e.Bid != nil:
		d := e.Bid
		b = num(num(strconv.AppendInt(b, d.Auction, 10), d.Bidder), d.Price)
		return str(num(str(str(b, d.Channel), d.URL), d.DateTime), d.Extra)
	}
	panic(fmt.Sprintf("nexmark: AppendCSV of an event of kind %v without its %v", e.Kind, e.Kind))
}

// Encode returns the encoding of e.
func Encode(e Event) []byte { return AppendEncode(make([]byte, 0, EncodedSize(e)), e) }

// EncodedSize is the length of e's encoding.
func EncodedSize(e Event) int {
	n := 1
	switch {
	case e.Kind == KindPerson && e.Person != nil:
		p := e.Person
		n += varintLen(p.ID) + varintLen(p.DateTime) + stringLen(p.Name) + stringLen(p.EmailAddress) +
			stringLen(p.CreditCard) + stringLen(p.City) + stringLen(p.State) + stringLen(p.Extra)
	case e.Kind == KindAuction && e.Auction != nil:
		a := e.Auction
		n += varintLen(a.ID) + stringLen(a.ItemName) + stringLen(a.Description) + varintLen(a.InitialBid) +
			varintLen(a.Reserve) + varintLen(a.DateTime) + varintLen(a.Expires-a.DateTime) +
			varintLen(a.Seller) + varintLen(a.Category) + stringLen(a.Extra)
	case e.Kind == KindBid && e.Bid != nil:
		d := e.Bid
		n += varintLen(d.Auction) + varintLen(d.Bidder) + varintLen(d.Price) + stringLen(d.Channel) +
			stringLen(d.URL) + varintLen(d.DateTime) + stringLen(d.Extra)
	}
	return n
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}

func uvarintLen(u uint64) int {
	n := 1
	for ; u >= 0x80; u >>= 7 {
		n++
	}
	return n
}

func stringLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

// Decode parses an encoded event. It never panics: any input that is not
// exactly one encoded event is an error wrapping ErrCorrupt.
func Decode(b []byte) (Event, error) {
	if len(b) == 0 {
		return Event{}, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	// One string holds all of the event's strings: a single allocation
	// where one per field would be eight.
	d := decoder{s: string(b[1:])}
	var e Event
	switch Kind(b[0]) {
	case KindPerson:
		p := &Person{}
		p.ID = d.int()
		p.Name = d.string()
		p.EmailAddress = d.string()
		p.CreditCard = d.string()
		p.City = d.string()
		p.State = d.string()
		p.DateTime = d.int()
		p.Extra = d.string()
		e = Event{Kind: KindPerson, Person: p}
	case KindAuction:
		a := &Auction{}
		a.ID = d.int()
		a.ItemName = d.string()
		a.Description = d.string()
		a.InitialBid = d.int()
		a.Reserve = d.int()
		a.DateTime = d.int()
		a.Expires = a.DateTime + d.int()
		a.Seller = d.int()
		a.Category = d.int()
		a.Extra = d.string()
		e = Event{Kind: KindAuction, Auction: a}
	case KindBid:
		x := &Bid{}
		x.Auction = d.int()
		x.Bidder = d.int()
		x.Price = d.int()
		x.Channel = d.string()
		x.URL = d.string()
		x.DateTime = d.int()
		x.Extra = d.string()
		e = Event{Kind: KindBid, Bid: x}
	default:
		return Event{}, fmt.Errorf("%w: unknown kind %d", ErrCorrupt, b[0])
	}
	if d.err != nil {
		return Event{}, d.err
	}
	if len(d.s) != 0 {
		return Event{}, fmt.Errorf("%w: %d bytes after the %v", ErrCorrupt, len(d.s), e.Kind)
	}
	return e, nil
}

// decoder reads fields from s until the first error, after which every
// read returns the zero value. The strings it returns are slices of s.
type decoder struct {
	s   string
	err error
}

func (d *decoder) int() int64 {
	if d.err != nil {
		return 0
	}
	u, n := uvarint(d.s)
	if n <= 0 {
		d.err = fmt.Errorf("%w: bad varint", ErrCorrupt)
		return 0
	}
	d.s = d.s[n:]
	// Zig-zag, as encoding/binary.AppendVarint writes it.
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (d *decoder) string() string {
	if d.err != nil {
		return ""
	}
	l, n := uvarint(d.s)
	if n <= 0 || l > uint64(len(d.s)-n) {
		d.err = fmt.Errorf("%w: bad string length", ErrCorrupt)
		return ""
	}
	v := d.s[n : n+int(l)]
	d.s = d.s[n+int(l):]
	return v
}

// uvarint is encoding/binary.Uvarint for a string: the value and the
// bytes read, 0 if s is too short, negative on overflow of 64 bits.
func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s); i++ {
		if i == binary.MaxVarintLen64 {
			return 0, -(i + 1)
		}
		c := s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -(i + 1)
			}
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}
