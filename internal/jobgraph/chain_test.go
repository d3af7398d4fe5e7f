package jobgraph

import (
	"maps"
	"testing"
)

func TestChainedAfter(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       map[string]string
	}{
		{"forward at equal parallelism chains, hash does not", `name: j
vertices:
  - {name: src, operator: o, parallelism: 2}
  - {name: map, operator: o, parallelism: 2, inputs: [{from: src}]}
  - {name: sum, operator: o, parallelism: 2, inputs: [{from: map, partition: hash}]}
  - {name: sink, operator: o, parallelism: 2, inputs: [{from: sum}]}
`, map[string]string{"map": "src", "sink": "sum"}},
		{"the job turns chaining off", `name: j
chaining: false
vertices:
  - {name: src, operator: o, parallelism: 2}
  - {name: sink, operator: o, parallelism: 2, inputs: [{from: src}]}
`, map[string]string{}},
		{"a vertex turns it off on both sides", `name: j
vertices:
  - {name: src, operator: o}
  - {name: map, operator: o, chaining: false, inputs: [{from: src}]}
  - {name: sink, operator: o, inputs: [{from: map}]}
`, map[string]string{}},
		{"two consumers, other parallelism, other slot-sharing group, side output, two inputs", `name: j
vertices:
  - {name: src, operator: o, parallelism: 2}
  - {name: a, operator: o, parallelism: 2, inputs: [{from: src}]}
  - {name: b, operator: o, parallelism: 2, inputs: [{from: src}]}
  - {name: c, operator: o, parallelism: 1, inputs: [{from: a, partition: rebalance}]}
  - {name: d, operator: o, parallelism: 2, slot-sharing-group: other, inputs: [{from: b}]}
  - {name: e, operator: o, parallelism: 2, inputs: [{from: d, output: late}]}
  - {name: f, operator: o, parallelism: 2, inputs: [{from: e}, {from: x}]}
  - {name: x, operator: o, parallelism: 2}
`, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := ParseSpec([]byte(tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			if got := ChainedAfter(g); !maps.Equal(got, tc.want) {
				t.Fatalf("chained %v, want %v", got, tc.want)
			}
			// The keys survive a round trip through the spec format.
			data, err := MarshalSpec(g)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseSpec(data)
			if err != nil {
				t.Fatal(err)
			}
			if got := ChainedAfter(back); !maps.Equal(got, tc.want) {
				t.Fatalf("after a round trip: chained %v, want %v\n%s", got, tc.want, data)
			}
		})
	}
}
