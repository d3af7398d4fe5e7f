package expr

import "testing"

// BenchmarkDecimalTimesBigint is Nexmark q1's 0.908 * price.
func BenchmarkDecimalTimesBigint(b *testing.B) {
	ev, err := Compile(fc("*", num("0.908"), col("price")))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ev(testRow); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFilter is (part of) Nexmark q2's WHERE.
func BenchmarkFilter(b *testing.B) {
	p, err := CompilePredicate(fc("or", fc("=", col("auction"), i32(1007)), fc("=", col("auction"), i32(1020))))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := p(testRow); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkRegexpGroup is Nexmark q21's channel_id extraction.
func BenchmarkRegexpGroup(b *testing.B) {
	ev, err := Compile(fc("regexp_match_group", col("url"), str("(&|^)channel_id=([^&]*)"), i32(2)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ev(testRow); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToChar is Nexmark q10's TO_CHAR(date_time, 'HH:MI').
func BenchmarkToChar(b *testing.B) {
	ev, err := Compile(fc("to_char", col("date_time"), str("HH:MI")))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ev(testRow); err != nil {
			b.Fatal(err)
		}
	}
}
