package nexmark

import (
	"math/bits"
	"strconv"
	"strings"
	"sync"
)

// The lists of PersonGenerator.java (both): few states and cities so the
// queries find matches even on small inputs.
var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
)

// minStringLength is StringsGenerator.MIN_STRING_LENGTH.
const minStringLength = 3

// nextString is StringsGenerator.nextString(random, maxLength, special)
// (Flink; Beam's has no special): 3 to maxLength−1 characters, each a
// random lower-case letter or, one time in 13, special; then trimmed of
// spaces as Java's String.trim does.
func nextString(r *rng, maxLength int32, special byte) string {
	n := minStringLength + r.intn(maxLength-minStringLength)
	b := make([]byte, n)
	for i := range b {
		if r.intn(13) == 0 {
			b[i] = special
		} else {
			b[i] = 'a' + byte(r.intn(26))
		}
	}
	if special == ' ' {
		return strings.Trim(string(b), " ")
	}
	return string(b)
}

// nextCreditCard is PersonGenerator.nextCreditCard (Flink): four random
// four-digit groups separated by spaces.
func nextCreditCard(r *rng) string {
	b := make([]byte, 0, 19)
	for i := range 4 {
		if i > 0 {
			b = append(b, ' ')
		}
		v := r.intn(10000)
		b = append(b, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
	}
	return string(b)
}

// nextExtra is StringsGenerator.nextExtra (both): a string making
// currentSize + its length average desiredAverageSize, uniform within ±20%
// of the gap; empty when currentSize is already larger.
func nextExtra(r *rng, currentSize, desiredAverageSize int) string {
	if currentSize > desiredAverageSize {
		return ""
	}
	gap := desiredAverageSize - currentSize
	delta := int(float64(gap)*0.2 + 0.5) // Math.round for non-negative values
	size := gap - delta
	if delta > 0 {
		size += int(r.intn(int32(2 * delta)))
	}
	return nextExactString(r, size)
}

// paddingLength is the length of StringsGenerator.REUSABLE_EXTRA_STRING.
const paddingLength = 1 << 20

// padding is REUSABLE_EXTRA_STRING: 1 MiB of random letters made once
// (from a fixed seed, where Flink's differs per JVM), which the extra
// fields are slices of, sharing its memory.
var padding = sync.OnceValue(func() string {
	r := newRNG(0x6e65786d61726b) // "nexmark"
	b := make([]byte, paddingLength)
	for i := range b {
		b[i] = 'a' + byte(r.intn(26))
	}
	return string(b)
})

// nextExactString is StringsGenerator.nextExactString (Flink): a slice of
// the padding at a random offset when shorter than half of it, else fresh
// random letters.
func nextExactString(r *rng, length int) string {
	if length < paddingLength/2 {
		off := int(r.intn(int32(paddingLength - length)))
		return padding()[off : off+length]
	}
	b := make([]byte, length)
	for i := range b {
		b[i] = 'a' + byte(r.intn(26))
	}
	return string(b)
}

// Bid channels, as BidGenerator.java (Flink) makes them.
const (
	hotChannelsRatio = 2      // HOT_CHANNELS_RATIO
	channelsNumber   = 10_000 // CHANNELS_NUMBER
)

var hotChannels = []string{"Google", "Facebook", "Baidu", "Apple"} // HOT_CHANNELS

// channelTable holds HOT_URLS and CHANNEL_URL_CACHE: the hot channels'
// urls and, for channel i, "channel-i" and its url (nine in ten carrying
// "&channel_id=" |Integer.reverse(i)|). Flink draws them from an unseeded
// random generator at class load; these come from a fixed seed, so they
// are the same in every process, as a restored or rescaled job needs.
type channelTable struct {
	hotURLs [4]string
	names   [channelsNumber]string
	urls    [channelsNumber]string
}

var channels = sync.OnceValue(func() *channelTable {
	t := &channelTable{}
	r := newRNG(0x6368616e6e656c) // "channel"
	for i := range t.hotURLs {
		t.hotURLs[i] = baseURL(&r)
	}
	for i := range channelsNumber {
		u := baseURL(&r)
		if r.intn(10) > 0 {
			// Math.abs(Integer.reverse(i)); |MinInt32| stays negative in
			// Go as in Java.
			v := int32(bits.Reverse32(uint32(i)))
			if v < 0 {
				v = -v
			}
			u += "&channel_id=" + strconv.Itoa(int(v))
		}
		t.names[i] = "channel-" + strconv.Itoa(i)
		t.urls[i] = u
	}
	return t
})

// baseURL is BidGenerator.getBaseUrl (Flink).
func baseURL(r *rng) string {
	return "https://www.nexmark.com/" + nextString(r, 5, '_') + "/" + nextString(r, 5, '_') + "/" +
		nextString(r, 5, '_') + "/item.htm?query=1"
}

// nextChannel is the channel and url choice of BidGenerator.nextBid
// (Flink): a hot channel with probability 1 − 1/HOT_CHANNELS_RATIO, else
// one of the 10,000 (getNextChannelAndurl).
func nextChannel(r *rng) (channel, url string) {
	t := channels()
	if r.intn(hotChannelsRatio) > 0 {
		i := r.intn(int32(len(hotChannels)))
		return hotChannels[i], t.hotURLs[i]
	}
	i := r.intn(channelsNumber)
	return t.names[i], t.urls[i]
}
