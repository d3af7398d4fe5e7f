package nexmarksql

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/nexmark"
)

func TestNames(t *testing.T) {
	all := slices.Concat(Names, UpdatingNames)
	if len(all) != len(queries) || len(all) != len(oracles) {
		t.Fatalf("%d names, %d queries, %d oracles", len(all), len(queries), len(oracles))
	}
	for _, q := range all {
		if _, ok := queries[q]; !ok {
			t.Errorf("%s has no query", q)
		}
		if _, ok := oracles[q]; !ok {
			t.Errorf("%s has no oracle", q)
		}
		body := Body(q)
		// The body is the SELECT alone: the sink's clauses and statement
		// end are Script's (q14 keeps RisingWave's comments within).
		if !strings.HasPrefix(body, "SELECT") || strings.Contains(body, ";") || strings.Contains(body, "noinspection") ||
			strings.Contains(body, "blackhole") || strings.TrimSpace(body) != body {
			t.Errorf("%s: body is not a bare SELECT:\n%s", q, body)
		}
	}
}

func TestBodyPanicsOnUnknownQuery(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	Body("q99")
}

// An updating query's key is columns of its output; an append-only one
// has none.
func TestKey(t *testing.T) {
	for _, q := range Names {
		if k := Key(q); k != nil {
			t.Errorf("%s: key %v", q, k)
		}
	}
	want := map[string][]string{
		"q4": {"category"}, "q9": {"id"}, "q15": {"day"}, "q16": {"channel", "day"},
		"q17": {"auction", "day"}, "q18": {"bidder", "auction"}, "q19": {"auction", "rank_number"},
	}
	for _, q := range UpdatingNames {
		if k := Key(q); !slices.Equal(k, want[q]) {
			t.Errorf("%s: key %v, want %v", q, k, want[q])
		}
		for _, c := range Key(q) {
			if !strings.Contains(Body(q), c) {
				t.Errorf("%s: key column %s not in\n%s", q, c, Body(q))
			}
		}
	}
	// A copy: the caller may change it.
	Key("q16")[0] = "x"
	if Key("q16")[0] != "channel" {
		t.Error("Key returns the query's own slice")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	Key("q99")
}

// The whole script of one query, written out by hand.
func TestScriptText(t *testing.T) {
	got := Script("q0", ScriptOptions{
		Events:        20000,
		Splits:        2,
		Generator:     nexmark.Config{FirstEventRate: 1000, BaseTime: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), HotBiddersRatio: 3},
		SourceOptions: []Option{{"nexmark.min.event.gap.in.ns", "0"}},
	})
	want := `CREATE SOURCE person (
    id BIGINT,
    name VARCHAR,
    email_address VARCHAR,
    credit_card VARCHAR,
    city VARCHAR,
    state VARCHAR,
    date_time TIMESTAMP,
    extra VARCHAR,
    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
    connector = 'nexmark',
    nexmark.table.type = 'Person',
    nexmark.split.num = '2',
    nexmark.event.num = '20000',
    nexmark.first.event.rate = '1000',
    nexmark.base.time = '1704067200000',
    nexmark.hot.bidder.ratio = '3',
    nexmark.us.states = 'az,ca,id,or,wa,wy',
    nexmark.min.event.gap.in.ns = '0'
);

CREATE SOURCE auction (
    id BIGINT,
    item_name VARCHAR,
    description VARCHAR,
    initial_bid BIGINT,
    reserve BIGINT,
    date_time TIMESTAMP,
    expires TIMESTAMP,
    seller BIGINT,
    category BIGINT,
    extra VARCHAR,
    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
    connector = 'nexmark',
    nexmark.table.type = 'Auction',
    nexmark.split.num = '2',
    nexmark.event.num = '20000',
    nexmark.first.event.rate = '1000',
    nexmark.base.time = '1704067200000',
    nexmark.hot.bidder.ratio = '3',
    nexmark.min.event.gap.in.ns = '0'
);

CREATE SOURCE bid (
    auction BIGINT,
    bidder BIGINT,
    price BIGINT,
    channel VARCHAR,
    url VARCHAR,
    date_time TIMESTAMP,
    extra VARCHAR,
    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
    connector = 'nexmark',
    nexmark.table.type = 'Bid',
    nexmark.split.num = '2',
    nexmark.event.num = '20000',
    nexmark.first.event.rate = '1000',
    nexmark.base.time = '1704067200000',
    nexmark.hot.bidder.ratio = '3',
    nexmark.min.event.gap.in.ns = '0'
);

CREATE SINK nexmark_q0 AS
SELECT auction, bidder, price, date_time
FROM bid
WITH (
    connector = 'blackhole',
    type = 'append-only',
    force_append_only = 'true'
);
`
	if got != want {
		t.Errorf("script:\n%s\nwant:\n%s", got, want)
	}
}

func TestScripts(t *testing.T) {
	for _, q := range slices.Concat(Names, UpdatingNames) {
		s := Script(q, ScriptOptions{})
		if !strings.Contains(s, "CREATE SINK nexmark_"+q+" AS\n"+Body(q)+"\nWITH (") {
			t.Errorf("%s: no sink of its body in\n%s", q, s)
		}
		if n := strings.Count(s, "CREATE SOURCE "); n != 3 {
			t.Errorf("%s: %d sources", q, n)
		}
		// Unset options are left to the connector's defaults.
		if strings.Contains(s, "nexmark.event.num") || strings.Contains(s, "nexmark.split.num") {
			t.Errorf("%s: options of the zero ScriptOptions:\n%s", q, s)
		}
		if strings.Contains(s, "CREATE FUNCTION") {
			t.Errorf("%s: a function in\n%s", q, s)
		}
		// p_time only on bid, only for q12.
		if n := strings.Count(s, "p_time TIMESTAMPTZ AS PROCTIME()"); n != map[bool]int{true: 1}[q == "q12"] ||
			n == 1 && !strings.Contains(s, "extra VARCHAR,\n    p_time TIMESTAMPTZ AS PROCTIME(),\n    WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND\n) WITH (\n    connector = 'nexmark',\n    nexmark.table.type = 'Bid'") {
			t.Errorf("%s: p_time %d times in\n%s", q, n, s)
		}
		// The lower-case states, on the person source alone.
		if n := strings.Count(s, "nexmark.us.states = 'az,ca,id,or,wa,wy'"); n != 1 ||
			strings.Index(s, "nexmark.us.states") > strings.Index(s, "CREATE SOURCE auction") {
			t.Errorf("%s: states in\n%s", q, s)
		}
	}
	if s := Script("q3", ScriptOptions{Generator: nexmark.Config{USStates: []string{"OR", "ID"}}}); !strings.Contains(s, "nexmark.us.states = 'OR,ID'") {
		t.Errorf("configured states not in\n%s", s)
	}

	// The sink and the watermark as configured; quotes in values doubled.
	s := Script("q1", ScriptOptions{
		WatermarkDelay: 1500 * time.Millisecond,
		Sink:           "file",
		SinkOptions:    []Option{{"path", "/tmp/it's"}, {"format", "csv"}},
	})
	for _, want := range []string{
		"WATERMARK FOR date_time AS date_time - INTERVAL '1.5' SECOND\n) WITH",
		"\nWITH (\n    connector = 'file',\n    path = '/tmp/it''s',\n    format = 'csv'\n);\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	if strings.Contains(s, "append-only") {
		t.Errorf("default sink options with SinkOptions set:\n%s", s)
	}
	if s := Script("q1", ScriptOptions{WatermarkDelay: -1}); strings.Contains(s, "WATERMARK") {
		t.Errorf("watermark with a negative delay:\n%s", s)
	}
	if s := Script("q1", ScriptOptions{Sink: "file"}); !strings.Contains(s, "connector = 'file',\n    type = 'append-only'") {
		t.Errorf("a named sink loses the default options:\n%s", s)
	}
}

// A suite: the sources once, then every query's sink with its options.
func TestSuite(t *testing.T) {
	names := []string{"q0", "q12", "q3"}
	s := Suite(names, ScriptOptions{Events: 1000}, func(q string) []Option {
		if q == "q3" {
			return nil
		}
		return []Option{{"connector", "file"}, {"path", "/out/" + q}, {"format", "csv"}}
	})
	if n := strings.Count(s, "CREATE SOURCE "); n != 3 || strings.LastIndex(s, "CREATE SOURCE ") > strings.Index(s, "CREATE SINK") {
		t.Errorf("%d sources, or not first, in\n%s", n, s)
	}
	if n := strings.Count(s, "p_time TIMESTAMPTZ AS PROCTIME()"); n != 1 {
		t.Errorf("p_time %d times", n)
	}
	last := 0
	for _, q := range names {
		i := strings.Index(s, "CREATE SINK nexmark_"+q+" AS\n"+Body(q)+"\nWITH (")
		if i < last {
			t.Fatalf("%s: not after the one before in\n%s", q, s)
		}
		last = i
	}
	for _, want := range []string{
		"CREATE SINK nexmark_q0 AS\n" + Body("q0") + "\nWITH (\n    connector = 'file',\n    path = '/out/q0',\n    format = 'csv'\n);\n\nCREATE SINK nexmark_q12",
		Body("q3") + "\nWITH (\n    connector = 'blackhole',\n    type = 'append-only',\n    force_append_only = 'true'\n);\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	if !strings.HasSuffix(s, ");\n") {
		t.Errorf("script ends %q", s[len(s)-10:])
	}
	if s := Suite([]string{"q0", "q1"}, ScriptOptions{}, nil); strings.Contains(s, "p_time") {
		t.Errorf("p_time without q12:\n%s", s)
	}
	defer func() {
		if recover() == nil {
			t.Error("a query twice: no panic")
		}
	}()
	Suite([]string{"q0", "q0"}, ScriptOptions{}, nil)
}

// Every query's oracle reads exactly the relations its body names.
func TestOracleKinds(t *testing.T) {
	for _, q := range slices.Concat(Names, UpdatingNames) {
		body := Body(q)
		var want []nexmark.Kind
		for _, k := range []struct {
			kind  nexmark.Kind
			names []string
		}{
			{nexmark.KindPerson, []string{"FROM person", "TUMBLE(person,", "JOIN person"}},
			{nexmark.KindAuction, []string{"FROM auction", "TUMBLE(auction,", "JOIN auction"}},
			{nexmark.KindBid, []string{"FROM bid", "TUMBLE(bid,", "HOP(bid,", "SESSION(bid,", "JOIN bid", "bid B\n", "bid AS B"}},
		} {
			if slices.ContainsFunc(k.names, func(n string) bool { return strings.Contains(body, n) }) {
				want = append(want, k.kind)
			}
		}
		if got := oracles[q].kinds; !slices.Equal(got, want) {
			t.Errorf("%s: oracle reads %v, the query %v", q, got, want)
		}
	}
}
