package nexmarksql

import (
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for _, c := range []struct {
		got  *row
		want string
	}{
		{new(row).i64(0).i64(-42).i64(1 << 62), "0,-42,4611686018427387904"},
		{new(row).num(908000, 3), "908.000"},
		{new(row).num(908, 3), "0.908"},
		{new(row).num(0, 3), "0.000"},
		{new(row).num(-5, 3), "-0.005"},
		{new(row).num(-12345, 2), "-123.45"},
		{new(row).num(7, 0), "7"},
		{new(row).num(-1<<63, 3), "-9223372036854775.808"},
		{new(row).ts(base), "2024-01-01 00:00:00"},
		{new(row).ts(base + 123), "2024-01-01 00:00:00.123"},
		{new(row).ts(base + 100), "2024-01-01 00:00:00.1"},
		{new(row).ts(base + 20), "2024-01-01 00:00:00.02"},
		{new(row).ts(base + 86_399_999), "2024-01-01 23:59:59.999"},
		{new(row).ts(-1), "1969-12-31 23:59:59.999"},
		{new(row).ts(0), "1970-01-01 00:00:00"},
		{new(row).text("plain text"), "plain text"},
		{new(row).text("a,b"), `"a,b"`},
		{new(row).text(`say "hi"`), `"say ""hi"""`},
		{new(row).text("two\nlines"), "\"two\nlines\""},
		{new(row).text("cr\r"), "\"cr\r\""},
		{new(row).text(""), `""`},
		{new(row).null(), ""},
		{new(row).null().i64(1).null(), ",1,"},
		{new(row).text("").null().text("x"), `"",,x`},
		{new(row).boolean(true).boolean(false), "t,f"},
	} {
		if got := c.got.String(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
