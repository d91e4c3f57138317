package wire

import (
	"fmt"
	"slices"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// TopEdit is one change to a top-level member of a summary call's body:
// Raw becomes its value (added last when absent), or with Raw nil the
// member is left out.
type TopEdit struct {
	Key string
	Raw []byte
}

// EditTop applies edits to body's top-level members in order; every other
// byte stays as it is. body must be a valid JSON object; it is not
// modified.
func EditTop(body []byte, edits ...TopEdit) ([]byte, error) {
	out := append([]byte(nil), body...)
	var err error
	for _, e := range edits {
		if e.Raw == nil {
			out, err = sjson.DeleteBytes(out, e.Key)
		} else {
			out, err = sjson.SetRawBytes(out, e.Key, e.Raw)
		}
		if err != nil {
			return nil, fmt.Errorf("compactor: summary call body, %s: %w", e.Key, err)
		}
	}
	return out, nil
}

// DropArrayElements returns body without the elements of its top-level
// array member key that drop reports true for (their commas with them);
// every other byte stays as it is. body must be valid JSON; it is not
// modified.
func DropArrayElements(body []byte, key string, drop func(gjson.Result) bool) ([]byte, error) {
	var at []int
	arr := gjson.GetBytes(body, key)
	if !arr.IsArray() {
		return body, nil
	}
	arr.ForEach(func(i, v gjson.Result) bool {
		if drop(v) {
			at = append(at, int(i.Int()))
		}
		return true
	})
	out := append([]byte(nil), body...)
	var err error
	for _, i := range slices.Backward(at) { // the last first: earlier indices stay
		if out, err = sjson.DeleteBytes(out, fmt.Sprintf("%s.%d", key, i)); err != nil {
			return nil, fmt.Errorf("compactor: summary call body, %s: %w", key, err)
		}
	}
	return out, nil
}

// HasList reports whether body's top-level member key is a non-empty
// array (tools offered: a tool_choice is only allowed then).
func HasList(body []byte, key string) bool {
	v := gjson.GetBytes(body, key)
	return v.IsArray() && len(v.Array()) > 0
}
