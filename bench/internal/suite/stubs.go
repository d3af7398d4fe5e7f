package suite

import "errors"

var errTODO = errors.New("not implemented yet")


func runFootprint(e *Env, b *Bench) error { return errTODO }
