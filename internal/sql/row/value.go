// Package row holds SQL values and their encodings: the binary row format
// records carry between SQL operators (and their keys), and the text, CSV
// and JSON forms connectors and clients read and write, printed as
// PostgreSQL prints them.
package row

import "math"

// Value is one nullable SQL value. Its meaning comes from the SQL type the
// value has (plan.Type), which it does not carry: every kind but VARCHAR
// lives in one int64 — integers; a float's IEEE bits (a REAL's widened
// to float64, exactly); a boolean as 0 or 1; a NUMERIC's mantissa,
// scaled by the type's Scale; a DATE's days since 1970-01-01; a
// TIMESTAMP's or TIMESTAMPTZ's microseconds since the Unix epoch (UTC);
// an INTERVAL's microseconds. The zero Value is NULL, so that a fresh Row
// is all NULLs.
type Value struct {
	s     string
	n     int64
	valid bool
}

// Row is one row's values, in its schema's column order.
type Row []Value

// Null is the NULL value.
func Null() Value { return Value{} }

// Int is an integer, a NUMERIC's mantissa, a DATE, a TIMESTAMP or an
// INTERVAL.
func Int(n int64) Value { return Value{n: n, valid: true} }

// Float is a DOUBLE PRECISION or REAL.
func Float(f float64) Value { return Value{n: int64(math.Float64bits(f)), valid: true} }

// Bool is a BOOLEAN.
func Bool(b bool) Value {
	if b {
		return Value{n: 1, valid: true}
	}
	return Value{valid: true}
}

// Str is a VARCHAR.
func Str(s string) Value { return Value{s: s, valid: true} }

// IsNull reports whether v is NULL.
func (v Value) IsNull() bool { return !v.valid }

// Int is v as made by Int (0 for NULL).
func (v Value) Int() int64 { return v.n }

// Float is v as made by Float.
func (v Value) Float() float64 { return math.Float64frombits(uint64(v.n)) }

// Bool is v as made by Bool.
func (v Value) Bool() bool { return v.n != 0 }

// Str is v as made by Str.
func (v Value) Str() string { return v.s }
