package nexmark

import "math"

// rng is the SplitMix64 generator (Steele, Lea, Flood, "Fast splittable
// pseudorandom number generators", OOPSLA 2014): the algorithm of Java's
// java.util.SplittableRandom, which the Flink generator
// (nexmark-flink .../generator/NexmarkGenerator.java) draws every event
// from. Seeding it with the event number is what Beam's generator does with
// java.util.Random (sdks/java/testing/nexmark .../generator/Generator.java,
// nextEvent: "new Random(getNextEventId())"), so event n is a pure function
// of n and the config. The bounded draws follow SplittableRandom's
// nextInt(bound) and nextDouble; the output is not claimed to match the
// JDK's bit for bit (nor could it match either Java suite, which differ
// from each other), only to be deterministic and well mixed.
//
// It is a value with no pointers, so a generator lives on the stack.
type rng struct{ seed uint64 }

// goldenGamma is SplitMix64's default increment (the odd integer nearest
// 2^64/φ).
const goldenGamma = 0x9e3779b97f4a7c15

func newRNG(seed int64) rng { return rng{seed: uint64(seed)} }

func (r *rng) nextSeed() uint64 {
	r.seed += goldenGamma
	return r.seed
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func mix32(z uint64) int32 {
	z = (z ^ (z >> 33)) * 0x62a9d9ed799705f5
	return int32(((z ^ (z >> 28)) * 0xcb24d0a5c88c35b3) >> 32)
}

// int64 is 64 random bits, like nextLong.
func (r *rng) int64() int64 { return int64(mix64(r.nextSeed())) }

// intn is uniform in [0, bound), bound > 0, by rejection like
// SplittableRandom.nextInt(int bound).
func (r *rng) intn(bound int32) int32 {
	x := mix32(r.nextSeed())
	m := bound - 1
	if bound&m == 0 { // a power of two
		return x & m
	}
	// u is uniform in [0, 2^31); reject the top partial block, detected as
	// u - (u mod bound) + m overflowing int32.
	for u := int32(uint32(x) >> 1); ; u = int32(uint32(mix32(r.nextSeed())) >> 1) {
		x = u % bound
		if u+m-x >= 0 {
			return x
		}
	}
}

// float64 is uniform in [0, 1), 53 random bits, like nextDouble.
func (r *rng) float64() float64 {
	return float64(mix64(r.nextSeed())>>11) * 0x1.0p-53
}

// int64n is uniform (or nearly) in [0, n), n > 0: LongGenerator.nextLong
// (both suites, .../generator/model/LongGenerator.java), which draws an int
// below 2^31−1 and otherwise takes |nextLong mod n| (skewed, as its comment
// warns, but only reached for very long auction horizons).
func (r *rng) int64n(n int64) int64 {
	if n < math.MaxInt32 {
		return int64(r.intn(int32(n)))
	}
	v := r.int64() % n
	if v < 0 {
		v = -v
	}
	return v
}
