package expr

import (
	"fmt"
	"strings"

	"github.com/weirproject/weir/internal/sql/plan"
	"github.com/weirproject/weir/internal/sql/row"
)

// resolveLogic types and, or (any number of arguments), not, is_true and
// is_false: BOOLEAN arguments.
func resolveLogic(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if n := len(args); n == 0 || n > 1 && fn != "and" && fn != "or" {
		return nil, boolean, undefined(fn, args)
	}
	want := make([]plan.Type, len(args))
	for i, a := range args {
		if a.Kind != plan.Bool && a.Kind != plan.Null {
			name := strings.ToUpper(strings.ReplaceAll(strings.Replace(fn, "is_", "is ", 1), "_", " "))
			return nil, boolean, fmt.Errorf("argument of %s must be type BOOLEAN, not type %s", name, a)
		}
		want[i] = boolean
	}
	return want, boolean, nil
}

// compileAndOr is AND or OR of three-valued logic: false AND NULL is
// false, true OR NULL is true, else NULL wins over the other value. It
// stops at the first argument that decides.
func compileAndOr(c *call) (Eval, error) {
	args := c.evals
	decisive := c.fn == "or" // the value that decides the result
	return func(r row.Row) (row.Value, error) {
		null := false
		for _, a := range args {
			v, err := a(r)
			switch {
			case err != nil:
				return v, err
			case v.IsNull():
				null = true
			case v.Bool() == decisive:
				return v, nil
			}
		}
		if null {
			return row.Null(), nil
		}
		return row.Bool(!decisive), nil
	}, nil
}

func compileNot(c *call) (Eval, error) {
	return unary(c.evals[0], func(x row.Value) (row.Value, error) { return row.Bool(!x.Bool()), nil }), nil
}

// compileIsBool is IS TRUE or IS FALSE: never NULL.
func compileIsBool(c *call) (Eval, error) {
	a, want := c.evals[0], c.fn == "is_true"
	return func(r row.Row) (row.Value, error) {
		v, err := a(r)
		return row.Bool(!v.IsNull() && v.Bool() == want), err
	}, nil
}

func resolveIsNull(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) != 1 {
		return nil, boolean, undefined(fn, args)
	}
	return args[:1:1], boolean, nil
}

func compileIsNull(c *call) (Eval, error) {
	a, want := c.evals[0], c.fn == "is_null"
	return func(r row.Row) (row.Value, error) {
		v, err := a(r)
		return row.Bool(v.IsNull() == want), err
	}, nil
}

// resolveCase types case(when1, then1, …, else): BOOLEAN conditions, and
// values of one type.
func resolveCase(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) < 3 || len(args)%2 == 0 {
		return nil, plan.Type{}, fmt.Errorf("case takes pairs of a condition and a value, then the ELSE value: %d arguments", len(args))
	}
	var values []plan.Type
	for i := 1; i < len(args); i += 2 {
		values = append(values, args[i])
	}
	values = append(values, args[len(args)-1])
	t, err := unify("CASE", values)
	if err != nil {
		return nil, t, err
	}
	want := make([]plan.Type, len(args))
	for i, a := range args {
		if i%2 == 1 || i == len(args)-1 {
			want[i] = t
			continue
		}
		if a.Kind != plan.Bool && a.Kind != plan.Null {
			return nil, t, fmt.Errorf("argument of CASE/WHEN must be type BOOLEAN, not type %s", a)
		}
		want[i] = boolean
	}
	return want, t, nil
}

// compileCase evaluates the conditions in order and only the value of
// the first true one (or the ELSE value).
func compileCase(c *call) (Eval, error) {
	args := c.evals
	last := len(args) - 1
	return func(r row.Row) (row.Value, error) {
		for i := 0; i < last; i += 2 {
			v, err := args[i](r)
			if err != nil {
				return v, err
			}
			if !v.IsNull() && v.Bool() {
				return args[i+1](r)
			}
		}
		return args[last](r)
	}, nil
}

func resolveCoalesce(fn string, args []plan.Type) ([]plan.Type, plan.Type, error) {
	if len(args) == 0 {
		return nil, plan.Type{}, undefined(fn, args)
	}
	t, err := unify("COALESCE", args)
	if err != nil {
		return nil, t, err
	}
	want := make([]plan.Type, len(args))
	for i := range want {
		want[i] = t
	}
	return want, t, nil
}

// compileCoalesce evaluates its arguments until one is not NULL.
func compileCoalesce(c *call) (Eval, error) {
	args := c.evals
	return func(r row.Row) (row.Value, error) {
		for _, a := range args {
			if v, err := a(r); err != nil || !v.IsNull() {
				return v, err
			}
		}
		return row.Null(), nil
	}, nil
}
