package expr

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

func TestArithmetic(t *testing.T) {
	runCases(t, []evalCase{
		{fc("+", i32(1), i32(2)), "3"},
		{fc("+", i32(math.MaxInt32), i32(1)), "error: integer out of range"},
		{fc("+", col("i16"), col("i16")), "-14"},
		{fc("*", cast(i32(200), tInt16), cast(i32(200), tInt16)), "error: smallint out of range"},
		{fc("*", col("i16"), i32(100000)), "-700000"},
		{fc("-", i64(math.MinInt64), i32(1)), "error: bigint out of range"},
		{fc("*", i64(math.MaxInt64), i32(2)), "error: bigint out of range"},
		{fc("/", i64(math.MinInt64), i32(-1)), "error: bigint out of range"},
		{fc("%", i64(math.MinInt64), i32(-1)), "0"},
		{fc("/", i32(7), i32(2)), "3"},
		{fc("/", i32(-7), i32(2)), "-3"},
		{fc("%", i32(-7), i32(3)), "-1"},
		{fc("mod", i32(7), i32(3)), "1"},
		{fc("/", i32(1), i32(0)), "error: division by zero"},
		{fc("%", i32(1), i32(0)), "error: division by zero"},
		{fc("neg", col("auction")), "-1007"},
		{fc("neg", i64(math.MinInt64)), "error: bigint out of range"},
		{fc("neg", cast(i32(-32768), tInt16)), "error: smallint out of range"},

		// NUMERIC is exact.
		{fc("*", num("0.908"), col("price")), "1000000.376"},
		{fc("*", num("0.908"), i64(1000000)), "908000.000"},
		{fc("+", num("1.5"), num("2.25")), "3.75"},
		{fc("-", num("1.005"), i32(1)), "0.005"},
		{fc("-", num("0.1"), num("0.3")), "-0.2"},
		{fc("+", col("n"), num("0.001")), "12.341"},
		{fc("*", num("1.5"), num("-1.5")), "-2.25"},
		{fc("/", num("10.0"), i32(3)), "3.333333"},
		{fc("/", i32(2), num("3.0")), "0.666667"},
		{fc("/", i32(-2), num("3.0")), "-0.666667"},
		{fc("/", num("2.5"), num("0.5")), "5.000000"},
		{fc("/", num("1.0"), num("0.0")), "error: division by zero"},
		{fc("/", num("1.0"), num("0.0000001")), "10000000.0000000"},
		{fc("/", num("9223372036854.775807"), num("0.000001")), "error: numeric field overflow"},
		{fc("%", num("10.5"), i32(3)), "1.5"},
		{fc("%", num("-10.5"), num("0.25")), "0.00"},
		{fc("%", num("-10.5"), num("0.2")), "-0.1"},
		{fc("%", num("1.5"), num("0.0")), "error: division by zero"},
		{fc("+", num("9223372036854775.807"), num("0.001")), "error: numeric field overflow"},
		{fc("+", num("9223372036854775.807"), num("-0.001")), "9223372036854775.806"},
		{fc("*", num("92233720368547758.07"), i32(10)), "error: numeric field overflow"},
		{fc("*", num("0.000000001"), num("0.0000000001")), "0.000000000000000000"},
		{fc("*", num("0.000000001"), num("0.0000000005")), "0.000000000000000001"},
		{fc("*", num("0.000000001"), num("-0.0000000005")), "-0.000000000000000001"},
		{fc("-", num("-9223372036854775.807"), num("0.001")), "-9223372036854775.808"},
		{fc("neg", num("-9223372036854775.808")), "error: numeric field overflow"},
		{fc("neg", col("n")), "-12.34"},
		{fc("+", col("n"), col("auction")), "1019.34"},

		// Floats.
		{fc("*", col("d"), i32(2)), "5"},
		{fc("+", col("d"), num("0.25")), "2.75"},
		{fc("*", dbl("1e308"), i32(10)), "error: value out of range: overflow"},
		{fc("*", dbl("1e-308"), dbl("1e-308")), "error: value out of range: underflow"},
		{fc("/", col("d"), dbl("0")), "error: division by zero"},
		{fc("/", col("d"), i32(4)), "0.625"},
		{fc("+", lit(tReal, "0.1"), lit(tReal, "0.2")), "0.3"},
		{fc("+", lit(tReal, "0.1"), dbl("0.2")), "0.30000000149011613"},
		{fc("-", dbl("Infinity"), dbl("1")), "Infinity"},
		{fc("neg", col("d")), "-2.5"},

		// Time.
		{fc("+", col("date_time"), ivl("10 seconds")), "2024-03-15 13:45:22.5"},
		{fc("+", ivl("1 day"), col("date_time")), "2024-03-16 13:45:12.5"},
		{fc("-", col("date_time"), ivl("1 day 02:00:00")), "2024-03-14 11:45:12.5"},
		{fc("-", col("date_time"), ts("2024-03-15")), "13:45:12.5"},
		{fc("-", ts("2024-03-15"), col("date_time")), "-13:45:12.5"},
		{fc("-", col("tz"), col("date_time")), "00:00:00"},
		{fc("-", col("date_time"), col("dt")), "13:45:12.5"},
		{fc("+", col("dt"), i32(1)), "2024-03-16"},
		{fc("+", i32(1), col("dt")), "2024-03-16"},
		{fc("-", col("dt"), i32(15)), "2024-02-29"},
		{fc("-", col("dt"), lit(tDate, "2024-01-01")), "74"},
		{fc("+", col("dt"), ivl("1 hour")), "2024-03-15 01:00:00"},
		{fc("+", col("iv"), ivl("-2 hours")), "1 day"},
		{fc("-", col("iv"), col("iv")), "00:00:00"},
		{fc("*", col("iv"), i32(2)), "2 days 04:00:00"},
		{fc("*", i32(2), col("iv")), "2 days 04:00:00"},
		{fc("*", col("iv"), num("1.5")), "1 day 15:00:00"},
		{fc("*", col("iv"), dbl("0.5")), "13:00:00"},
		{fc("/", col("iv"), i32(4)), "06:30:00"},
		{fc("/", ivl("1 second"), i32(3)), "00:00:00.333333"},
		{fc("/", ivl("2 seconds"), i32(-3)), "-00:00:00.666667"},
		{fc("/", col("iv"), i32(0)), "error: division by zero"},
		{fc("neg", col("iv")), "-1 days -02:00:00"},
		{fc("+", ts("294000-01-01"), ivl("1000000 days")), "error: timestamp out of range"},
		{fc("*", col("iv"), i64(math.MaxInt64)), "error: interval out of range"},

		// NULL in, NULL out.
		{fc("+", col("auction"), nul), "NULL"},
		{fc("*", nul, col("n")), "NULL"},
		{fc("+", col("date_time"), nul), "NULL"},
		{fc("-", nul, col("date_time")), "NULL"},
		{fc("*", col("iv"), nul), "NULL"},
		{fc("neg", nul), "NULL"},
		{fc("/", nul, i32(0)), "NULL"},
	})
}

func TestMath(t *testing.T) {
	runCases(t, []evalCase{
		{fc("abs", i32(-5)), "5"},
		{fc("abs", num("-1.50")), "1.50"},
		{fc("abs", dbl("-2.5")), "2.5"},
		{fc("abs", i64(math.MinInt64)), "error: bigint out of range"},
		{fc("abs", nul), "NULL"},
		{fc("round", num("2.5")), "3"},
		{fc("round", num("-2.5")), "-3"},
		{fc("round", num("2.49")), "2"},
		{fc("round", dbl("2.5")), "2"},
		{fc("round", dbl("3.5")), "4"},
		{fc("round", i32(7)), "7"},
		{fc("round", num("1.2345"), i32(2)), "1.2300"},
		{bind(true, "round", num("1.2345"), i32(2)), "1.23"},
		{bind(true, "round", num("1.2355"), i32(3)), "1.236"},
		{bind(true, "round", num("1.5"), i32(3)), "1.500"},
		{bind(true, "round", num("-1234.5"), i32(-2)), "-1200"},
		{bind(true, "round", i32(1234), i32(-2)), "1200"},
		{bind(true, "round", i32(5), i32(2)), "5.00"},
		{fc("round", col("n"), col("i16")), "0.00"},
		{fc("round", col("n"), nul), "NULL"},
		{fc("floor", num("-1.5")), "-2"},
		{fc("floor", num("1.5")), "1"},
		{fc("floor", num("-2.00")), "-2"},
		{fc("ceil", num("-1.5")), "-1"},
		{fc("ceil", num("1.2")), "2"},
		{fc("ceil", num("3")), "3"},
		{fc("floor", dbl("-2.5")), "-3"},
		{fc("ceil", dbl("2.1")), "3"},
		{fc("floor", i32(3)), "3"},
	})
}

func TestComparisons(t *testing.T) {
	runCases(t, []evalCase{
		{fc("=", col("auction"), i32(1007)), "t"},
		{fc("<>", col("auction"), i32(1007)), "f"},
		{fc("<", col("auction"), i32(1008)), "t"},
		{fc("<=", col("auction"), i32(1007)), "t"},
		{fc(">", col("auction"), i32(1007)), "f"},
		{fc(">=", col("auction"), i32(1008)), "f"},
		{fc(">", fc("*", num("0.908"), col("price")), i32(1000000)), "t"},
		{fc("<", fc("*", num("0.908"), col("price")), i32(50000000)), "t"},
		{fc("=", i32(1), num("1.0")), "t"},
		{fc("=", num("1.10"), num("1.1")), "t"},
		{fc("<", num("1.09"), num("1.1")), "t"},
		{fc(">", num("92233720368547758.07"), i64(math.MaxInt64)), "f"},
		{fc("<", i64(math.MaxInt64), num("9223372036854775.807")), "f"},
		{fc(">", i64(-math.MaxInt64), num("-9223372036854775.807")), "f"},
		{fc("=", col("d"), num("2.5")), "t"},
		{fc("=", dbl("NaN"), dbl("NaN")), "t"},
		{fc(">", dbl("NaN"), dbl("Infinity")), "t"},
		{fc("=", dbl("0"), dbl("-0")), "t"},
		{fc("<", str("a"), str("b")), "t"},
		{fc("=", col("channel"), str("Google")), "t"},
		{fc("<", str("Z"), str("a")), "t"},
		{fc("<", fls(), tru()), "t"},
		{fc("=", col("dt"), ts("2024-03-15")), "t"},
		{fc("<", col("dt"), col("date_time")), "t"},
		{fc("=", col("tz"), col("date_time")), "t"},
		{fc(">", col("iv"), ivl("1 day")), "t"},
		{fc("=", col("auction"), nul), "NULL"},
		{fc("=", nul, nul), "NULL"},
		{fc("<", col("extra"), str("x")), "NULL"},
	})
}

// TestThreeValuedLogic checks AND, OR and NOT over true, false and NULL.
func TestThreeValuedLogic(t *testing.T) {
	vals := map[string]plan.Expr{"t": tru(), "f": fls(), "NULL": nul}
	and := map[[2]string]string{
		{"t", "t"}: "t", {"t", "f"}: "f", {"t", "NULL"}: "NULL",
		{"f", "t"}: "f", {"f", "f"}: "f", {"f", "NULL"}: "f",
		{"NULL", "t"}: "NULL", {"NULL", "f"}: "f", {"NULL", "NULL"}: "NULL",
	}
	or := map[[2]string]string{
		{"t", "t"}: "t", {"t", "f"}: "t", {"t", "NULL"}: "t",
		{"f", "t"}: "t", {"f", "f"}: "f", {"f", "NULL"}: "NULL",
		{"NULL", "t"}: "t", {"NULL", "f"}: "NULL", {"NULL", "NULL"}: "NULL",
	}
	for pair, want := range and {
		if got := eval(t, fc("and", vals[pair[0]], vals[pair[1]])); got != want {
			t.Errorf("%s AND %s = %s, want %s", pair[0], pair[1], got, want)
		}
	}
	for pair, want := range or {
		if got := eval(t, fc("or", vals[pair[0]], vals[pair[1]])); got != want {
			t.Errorf("%s OR %s = %s, want %s", pair[0], pair[1], got, want)
		}
	}
	for in, want := range map[string]string{"t": "f", "f": "t", "NULL": "NULL"} {
		if got := eval(t, fc("not", vals[in])); got != want {
			t.Errorf("NOT %s = %s, want %s", in, got, want)
		}
	}
	runCases(t, []evalCase{
		// The deciding argument stops the evaluation: no division error.
		{fc("and", fls(), fc("=", fc("/", i32(1), i32(0)), i32(1))), "f"},
		{fc("or", tru(), fc("=", fc("/", i32(1), i32(0)), i32(1))), "t"},
		{fc("and", tru(), fc("=", fc("/", i32(1), i32(0)), i32(1))), "error: division by zero"},
		{fc("and", tru(), nul, fls()), "f"},
		{fc("or", fls(), nul, fls()), "NULL"},
		{fc("is_true", col("b")), "f"},
		{fc("is_false", col("b")), "f"},
		{fc("is_true", tru()), "t"},
		{fc("is_false", fls()), "t"},
		{fc("is_true", fls()), "f"},
		{fc("is_null", col("extra")), "t"},
		{fc("is_null", col("auction")), "f"},
		{fc("is_not_null", col("extra")), "f"},
		{fc("is_not_null", col("url")), "t"},
		{fc("is_null", nul), "t"},
	})
}

func TestInCaseCoalesce(t *testing.T) {
	runCases(t, []evalCase{
		{fc("in", col("auction"), i32(1007), i32(1020)), "t"},
		{fc("in", col("auction"), i32(1), i32(2)), "f"},
		{fc("in", col("auction"), i32(1), nul), "NULL"},
		{fc("in", col("auction"), nul, i32(1007)), "t"},
		{fc("in", nul, i32(1), i32(2)), "NULL"},
		{fc("in", col("auction"), num("1007.0"), dbl("1")), "t"},
		{fc("in", col("n"), num("12.340"), i32(1)), "t"},
		{fc("in", fc("lower", col("channel")), str("apple"), str("google")), "t"},
		{fc("in", col("dt"), col("date_time"), ts("2024-03-15")), "t"},

		{fc("case", fc(">", col("auction"), i32(2000)), str("big"), fc(">", col("auction"), i32(1000)), str("mid"), nul), "mid"},
		{fc("case", fc(">", col("auction"), i32(2000)), str("big"), nul), "NULL"},
		{fc("case", col("b"), i32(1), i32(2)), "2"},
		{fc("case", tru(), i32(1), num("2.5")), "1.0"},
		{fc("case", tru(), i32(1), fc("/", i32(1), i32(0))), "1"},
		{fc("case", fls(), fc("/", i32(1), i32(0)), i32(2)), "2"},
		{fc("case", nul, i32(1), i32(2)), "2"},
		{fc("coalesce", col("extra"), col("channel")), "Google"},
		{fc("coalesce", nul, i32(2), fc("/", i32(1), i32(0))), "2"},
		{fc("coalesce", nul, nul), "NULL"},
		{fc("coalesce", col("extra"), nul), "NULL"},
		{fc("coalesce", nul, i32(1), num("2.50")), "1.00"},
	})
}

func TestStrings(t *testing.T) {
	runCases(t, []evalCase{
		{fc("lower", col("channel")), "google"},
		{fc("upper", str("héllo")), "HÉLLO"},
		{fc("lower", nul), "NULL"},
		{fc("||", col("channel"), str("!")), "Google!"},
		{fc("||", col("channel"), col("extra")), "NULL"},
		{fc("||", str("x"), num("1.50")), "x1.50"},
		{fc("||", col("auction"), col("date_time")), "10072024-03-15 13:45:12.5"},
		{fc("concat", str("a"), nul, i32(1), tru(), col("extra")), "a1t"},
		{fc("concat", nul), ""},
		{fc("substr", str("hello"), i32(2), i32(3)), "ell"},
		{fc("substr", str("hello"), i32(0), i32(3)), "he"},
		{fc("substr", str("hello"), i32(-5)), "hello"},
		{fc("substr", str("hello"), i32(-5), i32(7)), "h"},
		{fc("substr", str("hello"), i32(2)), "ello"},
		{fc("substr", str("hello"), i32(10)), ""},
		{fc("substr", str("hello"), i32(5), i32(1)), "o"},
		{fc("substr", str("hello"), i64(2), i64(math.MaxInt64)), "ello"},
		{fc("substr", str("héllo"), i32(2), i32(2)), "él"},
		{fc("substr", str("hello"), i32(1), i32(-1)), "error: negative substring length not allowed"},
		{fc("substr", str("hello"), nul), "NULL"},
		{fc("split_part", str("a/b/c"), str("/"), i32(2)), "b"},
		{fc("split_part", str("a/b/c"), str("/"), i32(4)), ""},
		{fc("split_part", str("a/b/c"), str("/"), i32(-1)), "c"},
		{fc("split_part", str("a/b/c"), str("/"), i32(-3)), "a"},
		{fc("split_part", str("a/b/c"), str("/"), i32(-4)), ""},
		{fc("split_part", str("a//c"), str("/"), i32(2)), ""},
		{fc("split_part", str("a<>b<>c"), str("<>"), i32(3)), "c"},
		{fc("split_part", str("abc"), str(""), i32(1)), "abc"},
		{fc("split_part", str("abc"), str(""), i32(2)), ""},
		{fc("split_part", str("abc"), str("/"), i32(0)), "error: field position must not be zero"},
		{fc("split_part", col("url"), str("/"), i32(4)), "ojtd"},
		{fc("split_part", col("url"), str("/"), i32(6)), "hcpm"},
		{fc("char_length", str("héllo")), "5"},
		{fc("char_length", str("")), "0"},
		{fc("regexp_match_group", col("url"), str("(&|^)channel_id=([^&]*)"), i32(2)), "1536688128"},
		{fc("regexp_match_group", col("url"), str("(&|^)channel_id=([^&]*)"), i32(1)), "&"},
		{fc("regexp_match_group", col("url"), str("(&|^)channel_id=([^&]*)"), i32(3)), "NULL"},
		{fc("regexp_match_group", col("url"), str("(&|^)nothing=([^&]*)"), i32(2)), "NULL"},
		{fc("regexp_match_group", str("ab"), str("a(x)?b"), i32(1)), "NULL"},
		{fc("regexp_match_group", str("xaby"), str("ab"), i32(1)), "ab"},
		{fc("regexp_match_group", str("xaby"), str("ab"), i32(0)), "NULL"},
		{fc("regexp_match_group", str("xaby"), col("channel"), i32(1)), "NULL"},
		{fc("regexp_match_group", str("Google"), col("channel"), i32(1)), "Google"},
		{fc("regexp_extract", str("foothebar"), str("foo(.*?)(bar)"), i32(2)), "bar"},
		{fc("regexp_extract", str("foothebar"), str("foo(.*?)(bar)"), i32(1)), "the"},
		{fc("regexp_extract", str("foothebar"), str("foo(.*?)(bar)"), i32(0)), "foothebar"},
		{fc("regexp_extract", str("foothebar"), str("x"), i32(0)), "NULL"},
		{fc("regexp_extract", str("x"), str("("), i32(0)), "compile error: expr: invalid regular expression: error parsing regexp: missing closing ): `(`"},
		{fc("regexp_extract", col("channel"), fc("||", str("("), col("channel")), i32(0)), "error: invalid regular expression: error parsing regexp: missing closing ): `(Google`"},
		{fc("trim", str("  x y  ")), "x y"},
		{fc("trim", str("xxaxx"), str("x")), "a"},
		{fc("ltrim", str("xxaxx"), str("x")), "axx"},
		{fc("rtrim", str("  a  ")), "  a"},
		{fc("replace", str("abcabc"), str("b"), str("XY")), "aXYcaXYc"},
		{fc("replace", str("abc"), str(""), str("X")), "abc"},
		{fc("replace", col("extra"), str("c"), str("")), "NULL"},
		{fc("position", str("hello"), str("ll")), "3"},
		{fc("position", str("héllo"), str("l")), "3"},
		{fc("position", str("hello"), str("z")), "0"},
		{fc("position", str("hello"), str("")), "1"},
		// Nexmark q14's count_char.
		{fc("-", fc("char_length", col("url")), fc("char_length", fc("replace", col("url"), str("c"), str("")))), "3"},
	})
}

func TestLike(t *testing.T) {
	for _, c := range []struct {
		s, pattern string
		like       bool
		ilike      bool
	}{
		{"abc", "abc", true, true},
		{"abc", "ABC", false, true},
		{"abc", "a%", true, true},
		{"abc", "%c", true, true},
		{"abc", "%b%", true, true},
		{"abc", "%B%", false, true},
		{"abc", "a_c", true, true},
		{"ac", "a_c", false, false},
		{"abc", "_", false, false},
		{"", "%", true, true},
		{"", "_", false, false},
		{"", "", true, true},
		{"a", "", false, false},
		{"a%c", `a\%c`, true, true},
		{"abc", `a\%c`, false, false},
		{"a_c", `a\_c`, true, true},
		{"abc", `a\_c`, false, false},
		{`a\c`, `a\\c`, true, true},
		{"héllo", "h_llo", true, true},
		{"HÉLLO", "h_llo", false, true},
		{"HÉLLO", "hé%", false, true},
		{"mississippi", "%iss%ppi", true, true},
		{"mississippi", "m%iss%", true, true},
		{"mississippi", "%issip", false, false},
		{"aaa", "%a%a%a%", true, true},
		{"aa", "%a%a%a%", false, false},
		{"abc", "%%", true, true},
		{"abc", "a%b%c%d", false, false},
		{"ab\ncd", "ab_cd", true, true},
	} {
		for _, fn := range []string{"like", "not_like", "ilike"} {
			want := c.like
			switch fn {
			case "not_like":
				want = !c.like
			case "ilike":
				want = c.ilike
			}
			w := map[bool]string{true: "t", false: "f"}[want]
			// A constant pattern, and one computed per row.
			for _, p := range []plan.Expr{str(c.pattern), fc("||", str(c.pattern), col("extra"))} {
				if p.Op == plan.OpCall {
					p = fc("coalesce", p, str(c.pattern))
				}
				if got := eval(t, fc(fn, str(c.s), p)); got != w {
					t.Errorf("%q %s %q (pattern %s) = %s, want %s", c.s, fn, c.pattern, p.Op, got, w)
				}
			}
		}
	}
	runCases(t, []evalCase{
		{fc("like", col("extra"), str("%")), "NULL"},
		{fc("like", col("channel"), nul), "NULL"},
		{fc("like", col("channel"), str(`ab\`)), "compile error: expr: LIKE pattern must not end with escape character"},
		{fc("like", col("channel"), fc("||", str(`ab\`), col("channel"))), "f"},
		{fc("like", col("channel"), fc("||", col("channel"), str(`\`))), "error: LIKE pattern must not end with escape character"},
	})
}

func TestCasts(t *testing.T) {
	runCases(t, []evalCase{
		{cast(str("123"), bigint), "123"},
		{cast(str(" -5 "), integer), "-5"},
		{cast(str("x"), bigint), `error: invalid input syntax for type bigint: "x"`},
		{cast(str("99999"), tInt16), `error: value "99999" is out of range for type smallint`},
		{cast(num("1.5"), integer), "2"},
		{cast(num("-1.5"), integer), "-2"},
		{cast(num("-1.49"), bigint), "-1"},
		{cast(dbl("2.5"), integer), "2"},
		{cast(dbl("3.5"), integer), "4"},
		{cast(dbl("-2.5"), bigint), "-2"},
		{cast(dbl("1e19"), bigint), "error: bigint out of range"},
		{cast(dbl("NaN"), bigint), "error: bigint out of range"},
		{cast(dbl("40000"), tInt16), "error: smallint out of range"},
		{cast(i32(70000), tInt16), "error: smallint out of range"},
		{cast(i64(70000), integer), "70000"},
		{cast(num("1.23456"), numeric(2)), "1.23"},
		{cast(num("1.235"), numeric(2)), "1.24"},
		{cast(num("-1.235"), numeric(2)), "-1.24"},
		{cast(i32(5), numeric(2)), "5.00"},
		{cast(i64(math.MaxInt64), numeric(1)), "error: numeric field overflow"},
		{cast(num("1.5"), double), "1.5"},
		{cast(num("0.1"), tReal), "0.1"},
		{cast(num("9223372036854775.807"), double), "9.223372036854776e+15"},
		{cast(num("922337203685477.5807"), double), "922337203685477.6"},
		{cast(i64(math.MaxInt64), double), "9.223372036854776e+18"},
		{cast(i64(16777217), tReal), "1.6777216e+07"},
		{cast(dbl("0.1"), numeric(20-2)), "0.100000000000000000"},
		{cast(lit(tReal, "0.1"), double), "0.10000000149011612"},
		{cast(lit(tReal, "0.1"), numeric(10)), "0.1000000000"},
		{cast(dbl("1234.5678"), numeric(2)), "1234.57"},
		{cast(dbl("NaN"), numeric(2)), "error: cannot convert NaN to numeric"},
		{cast(dbl("-Infinity"), numeric(2)), "error: cannot convert infinity to numeric"},
		{cast(dbl("1e300"), tReal), "error: value out of range: overflow"},
		{cast(dbl("1e-300"), tReal), "error: value out of range: underflow"},
		{cast(dbl("1e300"), varchar), "1e+300"},
		{cast(tru(), varchar), "true"},
		{cast(str("yes"), boolean), "t"},
		{cast(i32(3), boolean), "t"},
		{cast(fls(), integer), "0"},
		{cast(num("1.50"), varchar), "1.50"},
		{cast(col("date_time"), varchar), "2024-03-15 13:45:12.5"},
		{cast(col("date_time"), tDate), "2024-03-15"},
		{cast(ts("1969-12-31 23:00:00"), tDate), "1969-12-31"},
		{cast(col("dt"), timestamp), "2024-03-15 00:00:00"},
		{cast(col("dt"), timestamptz), "2024-03-15 00:00:00+00"},
		{cast(col("date_time"), timestamptz), "2024-03-15 13:45:12.5+00"},
		{cast(col("tz"), timestamp), "2024-03-15 13:45:12.5"},
		{cast(str("2024-01-01T00:00:00Z"), timestamp), "2024-01-01 00:00:00"},
		{cast(str("2024-01-01 nope"), timestamp), `error: invalid input syntax for type timestamp: "2024-01-01 nope"`},
		{cast(str("10 seconds"), interval), "00:00:10"},
		{cast(col("iv"), varchar), "1 day 02:00:00"},
		{cast(col("extra"), bigint), "NULL"},
		{cast(nul, bigint), "NULL"},
		{cast(str("1.5e3"), numeric(1)), "1500.0"},
		{cast(str("0.001"), double), "0.001"},
	})
}

func TestTimeFunctions(t *testing.T) {
	dt := col("date_time")
	runCases(t, []evalCase{
		{fc("date_trunc", str("microseconds"), dt), "2024-03-15 13:45:12.5"},
		{fc("date_trunc", str("milliseconds"), ts("2024-03-15 13:45:12.1234565")), "2024-03-15 13:45:12.123"},
		{fc("date_trunc", str("second"), dt), "2024-03-15 13:45:12"},
		{fc("date_trunc", str("minute"), dt), "2024-03-15 13:45:00"},
		{fc("date_trunc", str("HOUR"), dt), "2024-03-15 13:00:00"},
		{fc("date_trunc", str("hours"), ts("1969-12-31 23:30:00")), "1969-12-31 23:00:00"},
		{fc("date_trunc", str("day"), dt), "2024-03-15 00:00:00"},
		{fc("date_trunc", str("week"), dt), "2024-03-11 00:00:00"},
		{fc("date_trunc", str("week"), ts("2024-03-11 00:00:01")), "2024-03-11 00:00:00"},
		{fc("date_trunc", str("week"), ts("2024-03-10 23:00:00")), "2024-03-04 00:00:00"},
		{fc("date_trunc", str("month"), dt), "2024-03-01 00:00:00"},
		{fc("date_trunc", str("quarter"), ts("2024-06-30")), "2024-04-01 00:00:00"},
		{fc("date_trunc", str("year"), dt), "2024-01-01 00:00:00"},
		{fc("date_trunc", str("decade"), dt), "2020-01-01 00:00:00"},
		{fc("date_trunc", str("century"), dt), "2001-01-01 00:00:00"},
		{fc("date_trunc", str("century"), ts("2000-12-31")), "1901-01-01 00:00:00"},
		{fc("date_trunc", str("millennium"), dt), "2001-01-01 00:00:00"},
		{fc("date_trunc", str("day"), col("dt")), "2024-03-15 00:00:00"},
		{fc("date_trunc", str("hour"), col("tz")), "2024-03-15 13:00:00+00"},
		{fc("date_trunc", str("hour"), col("iv")), "1 day 02:00:00"},
		{fc("date_trunc", str("day"), ivl("-1 days -02:00:00")), "-1 days"},
		{fc("date_trunc", str("month"), col("iv")), `compile error: expr: unit "month" not supported for type interval`},
		{fc("date_trunc", str("fortnight"), dt), `compile error: expr: unit "fortnight" not recognized for type TIMESTAMP`},
		{fc("date_trunc", col("channel"), dt), `error: unit "Google" not recognized for type TIMESTAMP`},
		{fc("date_trunc", str("day"), nul), "NULL"},

		{fc("extract", str("hour"), dt), "13.000000"},
		{bind(true, "extract", str("hour"), dt), "13"},
		{bind(true, "extract", str("second"), dt), "12.500000"},
		{bind(true, "extract", str("milliseconds"), dt), "12500.000"},
		{bind(true, "extract", str("microsecond"), dt), "12500000"},
		{bind(true, "extract", str("minute"), dt), "45"},
		{bind(true, "extract", str("day"), dt), "15"},
		{bind(true, "extract", str("month"), dt), "3"},
		{bind(true, "extract", str("quarter"), dt), "1"},
		{bind(true, "extract", str("year"), dt), "2024"},
		{bind(true, "extract", str("decade"), dt), "202"},
		{bind(true, "extract", str("century"), dt), "21"},
		{bind(true, "extract", str("millennium"), dt), "3"},
		{bind(true, "extract", str("dow"), dt), "5"},
		{bind(true, "extract", str("isodow"), ts("2024-03-17")), "7"},
		{bind(true, "extract", str("dow"), ts("2024-03-17")), "0"},
		{bind(true, "extract", str("doy"), dt), "75"},
		{bind(true, "extract", str("week"), dt), "11"},
		{bind(true, "extract", str("isoyear"), ts("2024-12-30")), "2025"},
		{bind(true, "extract", str("epoch"), dt), "1710510312.500000"},
		{bind(true, "extract", str("year"), ts("0001-06-01 BC")), "-1"},
		{bind(true, "extract", str("century"), ts("0001-06-01 BC")), "-1"},
		{bind(true, "extract", str("year"), col("dt")), "2024"},
		{bind(true, "extract", str("epoch"), col("iv")), "93600.000000"},
		{bind(true, "extract", str("hour"), col("iv")), "2"},
		{bind(true, "extract", str("day"), col("iv")), "1"},
		{bind(true, "extract", str("second"), ivl("1 minute 30.5 seconds")), "30.500000"},
		{bind(true, "extract", str("dow"), col("iv")), `compile error: expr: unit "dow" not supported for type INTERVAL`},
		{bind(true, "extract", str("fortnight"), dt), `compile error: expr: unit "fortnight" not recognized for type TIMESTAMP`},
		{fc("extract", col("channel"), dt), "compile error: expr: extract's field must be a constant"},
		{fc("extract", str("hour"), nul), "NULL"},
		// Nexmark q14.
		{fc("and", fc(">=", fc("extract", str("hour"), dt), i32(8)), fc("<=", fc("extract", str("hour"), dt), i32(18))), "t"},
		{fc("<=", bind(true, "extract", str("hour"), dt), i32(6)), "f"},

		{fc("to_char", dt, str("YYYY-MM-DD")), "2024-03-15"},
		{fc("to_char", dt, str("HH:MI")), "01:45"},
		{fc("to_char", ts("2024-03-15 00:05:00"), str("HH12:MI AM")), "12:05 AM"},
		{fc("to_char", dt, str("HH24:MI:SS.MS")), "13:45:12.500"},
		{fc("to_char", dt, str("hh24:mi:ss.us")), "13:45:12.500000"},
		{fc("to_char", dt, str("HH am a.m. P.M.")), "01 pm p.m. P.M."},
		{fc("to_char", dt, str("Mon MON mon")), "Mar MAR mar"},
		{fc("to_char", dt, str("Month|FMMonth|MONTH")), "March    |March|MARCH    "},
		{fc("to_char", dt, str("Day|FMDay|Dy|DY|dy")), "Friday   |Friday|Fri|FRI|fri"},
		{fc("to_char", dt, str(`"Year" YYYY, Q/DDD/D/ID/IW/WW`)), "Year 2024, 1/075/6/5/11/11"},
		{fc("to_char", dt, str("FMDD.FMMM.YY")), "15.3.24"},
		{fc("to_char", dt, str(`\HH`)), `\01`},
		{fc("to_char", dt, str(`\"HH\"`)), `"01"`},
		{fc("to_char", dt, str(`"a\"b\\c"`)), `a"b\c`},
		{fc("to_char", dt, str(`"unterminated`)), "unterminated"},
		{fc("to_char", dt, str("SSSS")), "49512"},
		{fc("to_char", col("tz"), str("YYYY-MM-DD HH24 TZ OF")), "2024-03-15 13 UTC +00"},
		{fc("to_char", dt, str("YYYY TZ")), "2024 "},
		{fc("to_char", col("dt"), str("YYYY-MM-DD HH24:MI")), "2024-03-15 00:00"},
		{fc("to_char", dt, col("channel")), "Google"},
		{fc("to_char", dt, nul), "NULL"},
	})
}

func TestNow(t *testing.T) {
	e := fc("now")
	if e.Type != timestamptz {
		t.Fatalf("now() is %s", e.Type)
	}
	ev, err := Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ev(nil)
	if d := time.Since(time.UnixMicro(v.Int())); err != nil || d < 0 || d > time.Minute {
		t.Errorf("now() = %v, %v", time.UnixMicro(v.Int()), err)
	}
}

func TestCompilePredicate(t *testing.T) {
	for _, c := range []struct {
		e    plan.Expr
		want bool
	}{
		{fc("=", col("auction"), i32(1007)), true},
		{fc("=", col("auction"), i32(1)), false},
		{fc("=", col("extra"), str("x")), false},
		{nul, false},
		{fc("or", fc("=", col("auction"), i32(1007)), fc("=", col("auction"), i32(1020))), true},
	} {
		p, err := CompilePredicate(c.e)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := p(testRow); err != nil || got != c.want {
			t.Errorf("%s: %v, %v", show(c.e), got, err)
		}
	}
	if _, err := CompilePredicate(col("auction")); err == nil || err.Error() != "expr: a condition must be BOOLEAN, not BIGINT" {
		t.Errorf("non-boolean predicate: %v", err)
	}
	p, _ := CompilePredicate(fc("=", fc("/", col("auction"), i32(0)), i32(1)))
	if _, err := p(testRow); err == nil || err.Error() != "division by zero" {
		t.Errorf("error: %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		e    plan.Expr
		want string
	}{
		{plan.Call("+", bigint, col("auction"), str("x")), "expr: operator does not exist: BIGINT + VARCHAR"},
		{plan.Call("=", boolean, col("auction"), col("d")), "expr: =: argument 1 is BIGINT, not the DOUBLE PRECISION it takes (a missing cast)"},
		{plan.Call("+", integer, col("auction"), i32(1)), "expr: +(BIGINT, INTEGER) returns BIGINT, not INTEGER"},
		{plan.Call("nope", bigint), "expr: function nope() does not exist"},
		{plan.Call("cast", bigint), "expr: cast takes one argument, not 0"},
		{plan.Call("cast", plan.Type{Kind: plan.Date}, tru()), "expr: cannot cast type BOOLEAN to DATE"},
		{plan.Expr{Op: "what"}, `expr: unknown expression op "what"`},
		{plan.Expr{Op: plan.OpConst, Type: bigint, Lit: "x"}, `expr: constant "x" of type BIGINT: strconv.ParseInt: parsing "x": invalid syntax`},
		{plan.Expr{Op: plan.OpConst, Type: tInt16, Lit: "40000"}, `expr: constant "40000" of type SMALLINT: out of range`},
		{plan.Expr{Op: plan.OpCol, Col: -1, Type: bigint}, "expr: column -1"},
	} {
		if _, err := Compile(c.e); err == nil || err.Error() != c.want {
			t.Errorf("Compile(%s): %v, want %q", show(c.e), err, c.want)
		}
	}
	ev, err := Compile(plan.ColRef(99, bigint))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev(testRow); err == nil || !strings.Contains(err.Error(), "column 99 of a row of 14") {
		t.Errorf("column out of range: %v", err)
	}
}

func TestLiteral(t *testing.T) {
	for _, c := range []struct {
		t    plan.Type
		lit  string
		null bool
		want row.Value
	}{
		{boolean, "true", false, row.Bool(true)},
		{bigint, "-5", false, row.Int(-5)},
		{numeric(3), "908", false, row.Int(908)},
		{double, "1e+16", false, row.Float(1e16)},
		{tReal, "0.1", false, row.Float(float64(float32(0.1)))},
		{varchar, "x", false, row.Str("x")},
		{bigint, "", true, row.Null()},
		{null, "", true, row.Null()},
	} {
		if got, err := Literal(c.t, c.lit, c.null); err != nil || got != c.want {
			t.Errorf("Literal(%s, %q) = %+v, %v", c.t, c.lit, got, err)
		}
	}
}
