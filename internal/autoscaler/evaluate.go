package autoscaler

import (
	"fmt"
	"math"
)

// minBusy is the busy share below which a unit's true processing rate is
// taken at this share: a unit busy for less than a millisecond a second
// has a rate too large to measure, and dividing by its busy time would
// make it look unbounded.
const minBusy = 0.001

// flow is what a unit passes on to its consumers: the rate it must keep
// up with and the backlog catch-up rate, in its input's records, and how
// many records it emits per record it takes.
type flow struct {
	target, catchUp, ratio float64
}

// evaluate computes every unit's figures over samples (oldest first, all
// of one shape: a restart starts the window again) and the parallelism
// they call for. It returns nil for no samples.
func evaluate(cfg Config, samples []sample) []Evaluation {
	if len(samples) == 0 {
		return nil
	}
	first, last := samples[0], samples[len(samples)-1]
	span := last.at.Sub(first.at).Seconds()
	flows := map[string]flow{}
	evals := make([]Evaluation, 0, len(last.units))
	for _, u := range last.units {
		var busy, in, out float64
		n := 0
		pendFirst, pendLast := int64(-1), int64(-1)
		for _, s := range samples {
			for _, su := range s.units {
				if su.Name != u.Name {
					continue
				}
				busy += su.BusyMsPerSecond
				in += su.RecordsInPerSecond
				out += su.RecordsOutPerSecond
				n++
				if su.PendingRecords >= 0 {
					if pendFirst < 0 {
						pendFirst = su.PendingRecords
					}
					pendLast = su.PendingRecords
				}
			}
		}
		busy, in, out = busy/float64(n), in/float64(n), out/float64(n)
		e := Evaluation{
			Vertex: u.Name, Parallelism: u.Parallelism, BusyMsPerSecond: busy,
			RecordsInPerSecond: in, RecordsOutPerSecond: out, PendingRecords: -1,
		}
		// A source's work is what it emits; any other unit's what it takes.
		processed := in
		if u.Source {
			processed = out
		}
		var target, backlog float64
		if u.Source {
			// Its input arrives at the rate it reads plus the backlog's
			// growth; the backlog is to be caught up on top.
			target = processed
			if pendLast >= 0 {
				e.PendingRecords = pendLast
				if span > 0 {
					target += float64(pendLast-pendFirst) / span
				}
				target = max(target, 0)
				backlog = float64(pendLast) / cfg.CatchUpDuration.Seconds()
			}
		} else {
			for _, up := range u.Inputs {
				f := flows[up]
				target += f.target * f.ratio
				backlog += f.catchUp * f.ratio
			}
		}
		ratio := 1.0 // unknown without records: as many out as in
		if processed > 0 {
			ratio = out / processed
		}
		flows[u.Name] = flow{target: target, catchUp: backlog, ratio: ratio}
		e.TargetRate = target
		// The input that arrives during the rescale's own pause must be
		// caught up too.
		e.CatchUpRate = backlog + target*cfg.RestartTime.Seconds()/cfg.CatchUpDuration.Seconds()
		e.Recommended, e.Reason = recommend(cfg, u, &e, processed)
		evals = append(evals, e)
	}
	return evals
}

// recommend fills e's true processing rate and utilization and returns
// the parallelism they call for, with the reason.
func recommend(cfg Config, u Unit, e *Evaluation, processed float64) (int32, string) {
	p := u.Parallelism
	lo, hi, bound := bounds(cfg, u)
	need := e.TargetRate/cfg.TargetUtilization + e.CatchUpRate
	var factor float64
	switch {
	case processed <= 0 && need <= 0:
		factor = 0
	case processed <= 0:
		return p, "handled no records in the window while its input needs some: its processing rate is unknown"
	default:
		e.TrueProcessingRate = processed / max(e.BusyMsPerSecond/1000, minBusy)
		e.Utilization = e.TargetRate / e.TrueProcessingRate
		upper := min(cfg.TargetUtilization+cfg.UtilizationBoundary, 1)
		lower := cfg.TargetUtilization - cfg.UtilizationBoundary
		capHigh := e.TargetRate/upper + e.CatchUpRate
		capLow := math.Inf(1)
		if lower > 0 {
			capLow = e.TargetRate/lower + e.CatchUpRate
		}
		if e.TrueProcessingRate >= capHigh && e.TrueProcessingRate <= capLow && p >= lo && p <= hi {
			e.Within = true
			return p, fmt.Sprintf("utilization %.2f is within %.2f ± %.2f", e.Utilization, cfg.TargetUtilization, cfg.UtilizationBoundary)
		}
		factor = need / e.TrueProcessingRate
	}
	factor = min(max(factor, 1-cfg.MaxScaleDownFactor), 1+cfg.MaxScaleUpFactor)
	// In floating point until bounded: a large factor would overflow.
	want := math.Ceil(float64(p)*factor - 1e-9)
	q := int32(min(max(want, float64(lo)), float64(hi)))
	if u.Keyed && u.MaxParallelism > 0 {
		// Key groups spread evenly only over a divisor of their number;
		// Flink rounds up to the next one, within the bounds.
		for d := q; d <= hi && d <= u.MaxParallelism/2; d++ {
			if u.MaxParallelism%d == 0 {
				q = d
				break
			}
		}
	}
	why := fmt.Sprintf("needs %.0f records/s (%.0f / %.2f target utilization + %.0f catch-up)", need, e.TargetRate, cfg.TargetUtilization, e.CatchUpRate)
	if e.TrueProcessingRate > 0 {
		why += fmt.Sprintf(" of a true processing rate of %.0f at parallelism %d: utilization %.2f", e.TrueProcessingRate, p, e.Utilization)
	} else {
		why = "no input: scaling down"
	}
	switch {
	case want < float64(lo) || want > float64(hi):
		why += fmt.Sprintf("; %.0f is outside %d..%d (%s)", want, lo, hi, bound)
	case float64(q) != want:
		why += fmt.Sprintf("; %.0f rounded to %d, a divisor of the %d key groups", want, q, u.MaxParallelism)
	}
	return q, why
}

// bounds are the parallelisms u may take, and what sets the upper one.
func bounds(cfg Config, u Unit) (lo, hi int32, why string) {
	lo, hi, why = 1, u.MaxParallelism, "max-parallelism"
	if hi <= 0 {
		hi = math.MaxInt32
	}
	lo = max(lo, cfg.MinParallelism)
	if cfg.MaxParallelism > 0 && cfg.MaxParallelism < hi {
		hi, why = cfg.MaxParallelism, "autoscaler max-parallelism"
	}
	for _, v := range u.Vertices {
		b, ok := cfg.Vertices[v]
		if !ok {
			continue
		}
		lo = max(lo, b.Min)
		if b.Max > 0 && b.Max < hi {
			hi, why = b.Max, "the bounds of "+v
		}
	}
	if u.Source && u.Splits > 0 && u.Splits < hi {
		hi, why = u.Splits, "its splits: more subtasks would idle"
	}
	lo = min(lo, hi)
	return lo, hi, why
}
