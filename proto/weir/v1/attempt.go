package weirv1

import "strconv"

// Key names the attempt in maps and messages, one format everywhere:
// job/vertex/index/attempt@session, the job and session left out when
// unset. It is on the path of every ack, so it is built with one
// allocation and no fmt.
func (a *ExecutionAttemptID) Key() string {
	j, v, s := a.GetJobId(), a.GetVertex(), a.GetSession()
	b := make([]byte, 0, len(j)+len(v)+len(s)+26)
	if j != "" {
		b = append(b, j...)
		b = append(b, '/')
	}
	b = append(b, v...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(a.GetSubtaskIndex()), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(a.GetAttempt()), 10)
	if s != "" {
		b = append(b, '@')
		b = append(b, s...)
	}
	return string(b)
}

// Terminal reports whether an attempt in state s stopped for good.
func (s ExecutionState) Terminal() bool {
	switch s {
	case ExecutionState_EXECUTION_STATE_FINISHED, ExecutionState_EXECUTION_STATE_CANCELED, ExecutionState_EXECUTION_STATE_FAILED:
		return true
	}
	return false
}
