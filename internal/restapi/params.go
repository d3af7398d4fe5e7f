package restapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// ---------------------------------------------------------------------------
// Parameters and bodies

var hex32 = regexp.MustCompile(`^[0-9a-fA-F]{32}$`)

func jobIDParam(r *http.Request) (string, error) {
	id := r.PathValue("jobid")
	if !hex32.MatchString(id) {
		return "", errorf(http.StatusBadRequest, "bad job ID %q: a job ID is a 32-character hexadecimal string", id)
	}
	return strings.ToLower(id), nil
}

func triggerIDParam(r *http.Request) (string, error) {
	id := r.PathValue("triggerid")
	if !hex32.MatchString(id) {
		return "", errorf(http.StatusBadRequest, "bad trigger ID %q: a trigger ID is the 32-character hexadecimal request-id a trigger returned", id)
	}
	return strings.ToLower(id), nil
}

func checkpointIDParam(r *http.Request) (int64, error) {
	raw := r.PathValue("checkpointid")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 0 {
		return 0, errorf(http.StatusBadRequest, "bad checkpoint ID %q: a checkpoint ID is a non-negative integer", raw)
	}
	return id, nil
}

// fieldHints point at the field a misspelt one most likely meant: Flink's
// savepoint and stop bodies spell the same things differently.
var fieldHints = map[string]string{
	"targetDirectory": "target-directory", "target-directory": "targetDirectory",
	"cancelJob": "cancel-job", "cancel_job": "cancel-job", "target_directory": "target-directory",
	"trigger-id": "triggerId", "checkpoint-type": "checkpointType", "type": "checkpointType",
	// GET .../checkpoints/config writes min_pause; Weir's PATCH of it
	// takes Flink's configuration key's spelling.
	"min_pause": "min-pause", "minPause": "min-pause",
}

// decodeBody decodes a JSON request body into v strictly: unknown fields
// and type mismatches are errors. An empty body is an empty object, as in
// Flink. The body's size is bounded by the route (handleLimit).
func decodeBody(r *http.Request, name string, v any) error {
	data, err := io.ReadAll(r.Body)
	if tooLarge, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return errorf(http.StatusRequestEntityTooLarge, "%s", bodyTooLarge(tooLarge.Limit))
	}
	if err != nil {
		return errorf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	// Not dec.More: it does not see a stray '}' or ']' after the value.
	if err == nil && len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		err = errors.New("unexpected data after the JSON object")
	}
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return errorf(http.StatusBadRequest, "request body does not match %s: field %q must be %s, got a JSON %s",
			name, typeErr.Field, typeErr.Type.String(), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return errorf(http.StatusBadRequest, "request body is not valid JSON (%v at byte %d); expected %s", syntaxErr, syntaxErr.Offset, name)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "request body is not valid JSON (it ends early); expected %s", name)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		msg := fmt.Sprintf("request body does not match %s: unknown field %q", name, field)
		if hint, ok := fieldHints[field]; ok && hasJSONField(v, hint) {
			msg += fmt.Sprintf(" (did you mean %q?)", hint)
		}
		return errorf(http.StatusBadRequest, "%s", msg)
	}
	return errorf(http.StatusBadRequest, "request body does not match %s: %v", name, err)
}

// hasJSONField reports whether the struct v points at has a field with
// JSON name name.
func hasJSONField(v any, name string) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	_, ok := m[name]
	return ok
}

func optionalTriggerID(id *string) (string, error) {
	if id == nil || *id == "" {
		return newTriggerID(), nil
	}
	if !hex32.MatchString(*id) {
		return "", errorf(http.StatusBadRequest, "bad triggerId %q: a trigger ID is a 32-character hexadecimal string", *id)
	}
	return strings.ToLower(*id), nil
}
