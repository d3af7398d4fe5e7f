package compile

import (
	"math"
	"strconv"
	"strings"

	"github.com/weirproject/weir/internal/sql/plan"
)

// join plans an inner join of l and r on conds (over l's columns then
// r's). It picks, as Flink's planner does, the join whose state the
// streams bound:
//   - a window join when both inputs are results of the same windows and
//     the condition equates their window_start or window_end;
//   - an interval join when the condition bounds one input's event time
//     by the other's from both sides;
//   - otherwise a regular join, which keeps both inputs forever.
//
// Every condition stays in the join's filter as well, so the pairs it
// emits are exactly the ones SQL defines (the keys and time bounds only
// say which rows can meet).
func (b *binder) join(l, r *rel, conds []plan.Expr, jtype plan.JoinType, off int) (*rel, error) {
	nl := len(l.cols)
	var lkeys, rkeys []int
	windowEq := false
	lower, upper := int64(math.MinInt64), int64(math.MaxInt64)
	for _, c := range conds {
		if c.Op != plan.OpCall || len(c.Args) != 2 {
			continue
		}
		x, y := c.Args[0], c.Args[1]
		if c.Fn == "=" && x.Op == plan.OpCol && y.Op == plan.OpCol && x.Type == y.Type {
			if x.Col >= nl {
				x, y = y, x
			}
			if x.Col < nl && y.Col >= nl {
				lkeys, rkeys = append(lkeys, x.Col), append(rkeys, y.Col-nl)
				if l.win != nil && r.win != nil && sameWindows(l.win.w, r.win.w) &&
					(x.Col == l.win.start && y.Col-nl == r.win.start || x.Col == l.win.end && y.Col-nl == r.win.end) {
					windowEq = true
				}
				continue
			}
		}
		// Time bounds: left.t + a OP right.t + c.
		ls, a, ok1 := timeTerm(x, l, r, nl)
		rs, cc, ok2 := timeTerm(y, l, r, nl)
		if !ok1 || !ok2 || ls == rs {
			continue
		}
		fn := c.Fn
		if ls == 1 { // right OP left: flip to left OP' right
			a, cc = cc, a
			fn = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[fn]
		}
		// left.ts + a OP right.ts + cc  ⇔  right.ts OP' left.ts + (a − cc)
		d := a - cc
		switch fn {
		case "<=":
			lower = max(lower, floorMs(d))
		case "<":
			lower = max(lower, floorMs(d)+1)
		case ">=":
			upper = min(upper, ceilMs(d))
		case ">":
			upper = min(upper, ceilMs(d)-1)
		case "=":
			lower, upper = max(lower, floorMs(d)), min(upper, ceilMs(d))
		}
	}
	j := &joinNode{left: l, right: r, lkeys: lkeys, rkeys: rkeys, filter: and(conds), jtype: jtype}
	out := &rel{n: j, cols: append(append([]col{}, l.cols...), r.cols...), rowtime: -1, proctime: -1, watermarked: l.watermarked || r.watermarked}
	if jtype != plan.InnerJoin || l.updating() || r.updating() {
		// Only a regular join takes results that update, or pads with
		// NULLs; its output updates.
		if len(lkeys) == 0 {
			return nil, b.s.errAt(off, "a join needs an equality of the two sides' columns (of the same type): cross joins and joins on expressions alone are not supported")
		}
		j.kind = plan.RegularJoin
		out.mode = plan.Retract
		switch {
		case jtype != plan.InnerJoin:
			out.why = strings.ToUpper(string(jtype)) + " OUTER JOIN"
		case l.updating():
			out.why = "a join of " + l.why
		default:
			out.why = "a join of " + r.why
		}
		return out, nil
	}
	switch {
	case windowEq:
		j.kind, j.size = plan.WindowJoin, l.win.w.Slide
		out.win = &winAttr{w: l.win.w, start: l.win.start, end: l.win.end}
	case lower != math.MinInt64 && upper != math.MaxInt64:
		if lower > upper {
			return nil, b.s.errAt(off, "the join's time bounds leave no pairs (right.ts in [left.ts%+d ms, left.ts%+d ms])", lower, upper)
		}
		if !l.watermarked || !r.watermarked {
			return nil, b.s.errAt(off, "an interval join needs event time on both inputs (a source WATERMARK)")
		}
		j.kind, j.lower, j.upper = plan.IntervalJoin, lower, upper
	default:
		if len(lkeys) == 0 {
			return nil, b.s.errAt(off, "a join needs an equality of the two sides' columns (of the same type): cross joins and joins on expressions alone are not supported")
		}
		j.kind = plan.RegularJoin
	}
	return out, nil
}

func sameWindows(a, b plan.Window) bool {
	return a.Kind == b.Kind && a.Size == b.Size && a.Slide == b.Slide && a.ProcessingTime == b.ProcessingTime
}

// timeTerm reads e as side.ts + offset µs, where side is 0 (left) or 1
// (right) and e is a time attribute of that side (the event-time column,
// window_start or window_end of windows' results) plus or minus a
// constant interval.
func timeTerm(e plan.Expr, l, r *rel, nl int) (side int, offUs int64, ok bool) {
	var d int64
	if e.Op == plan.OpCall && (e.Fn == "+" || e.Fn == "-") && len(e.Args) == 2 && e.Args[1].Op == plan.OpConst && e.Args[1].Type.Kind == plan.Interval {
		v, err := strconv.ParseInt(e.Args[1].Lit, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if e.Fn == "-" {
			v = -v
		}
		d, e = v, e.Args[0]
	}
	if e.Op != plan.OpCol {
		return 0, 0, false
	}
	rr, c := l, e.Col
	if c >= nl {
		side, rr, c = 1, r, c-nl
	}
	switch {
	case c == rr.rowtime:
		return side, d, true
	case rr.win != nil && c == rr.win.end:
		// rows of a window are stamped at its last millisecond.
		return side, d + 1000, true
	case rr.win != nil && c == rr.win.start:
		return side, d + 1000 - rr.win.w.Size*1000, true
	}
	return 0, 0, false
}

// floorMs and ceilMs turn a µs offset into whole ms, widening the bound.
func floorMs(us int64) int64 {
	if us >= 0 || us%1000 == 0 {
		return us / 1000
	}
	return us/1000 - 1
}

func ceilMs(us int64) int64 {
	if us <= 0 || us%1000 == 0 {
		return us / 1000
	}
	return us/1000 + 1
}
