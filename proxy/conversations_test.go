package proxy

import (
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxpress/ctxpress/admin"

	"github.com/ctxpress/ctxpress/state"
)

// convFixture is a real bolt db holding "a" in two namespaces and "b" in
// one, "b" the most recently updated, reopened read-only when readOnly (so
// every write fails while reads work).
func convFixture(t *testing.T, readOnly bool) (state.Store, state.Key, state.Key, state.Key) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	st, err := state.OpenBolt(path, state.BoltOptions{Now: func() time.Time { return now }, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	a1, a2, b := state.NewKey([]byte("Bearer one"), "a"), state.NewKey([]byte("Bearer two"), "a"), state.NewKey([]byte("Bearer one"), "b")
	for _, k := range []state.Key{a1, a2, b} {
		now = now.Add(time.Minute)
		if _, err := st.Update(k, func(r *state.Record) error { r.Requests = 1; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if readOnly {
		st.Close()
		if st, err = state.OpenBolt(path, state.BoltOptions{ReadOnly: true, SweepInterval: -1}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { st.Close() })
	return st, a1, a2, b
}

// The operations the admin API and the CLI share, each rule a row.
func TestConversationsOperations(t *testing.T) {
	st, a1, a2, b := convFixture(t, false)
	ops := admin.Conversations{Store: st, Compacting: func(k state.Key) bool { return k == b }}
	ids := func(p admin.ConversationPage) (out []string) {
		for _, c := range p.Data {
			out = append(out, c.ID+"@"+c.Namespace[:4])
		}
		return out
	}
	ns1, ns2 := a1.Namespace[:4], a2.Namespace[:4]

	for _, tc := range []struct {
		rule                  string
		namespace             string
		offset, limit         int
		want                  []string
		hasMore               bool
		wantLimit, wantOffset int
	}{
		{rule: "newest first, one page", limit: 10, want: []string{"b@" + ns1, "a@" + ns2, "a@" + ns1}, wantLimit: 10},
		{rule: "one more record than the page says there is more", limit: 2, want: []string{"b@" + ns1, "a@" + ns2}, hasMore: true, wantLimit: 2},
		{rule: "offset skips", offset: 2, limit: 2, want: []string{"a@" + ns1}, wantLimit: 2, wantOffset: 2},
		{rule: "a namespace lists only its own", namespace: a1.Namespace, limit: 10, want: []string{"b@" + ns1, "a@" + ns1}, wantLimit: 10},
		{rule: "a limit below 1 is 1", limit: 0, want: []string{"b@" + ns1}, hasMore: true, wantLimit: 1},
		{rule: "a limit above the largest page is the largest page", limit: 10000, want: []string{"b@" + ns1, "a@" + ns2, "a@" + ns1}, wantLimit: admin.MaxListLimit},
		{rule: "a negative offset is 0", offset: -5, limit: 1, want: []string{"b@" + ns1}, hasMore: true, wantLimit: 1},
	} {
		p, err := ops.List(tc.namespace, tc.offset, tc.limit)
		if err != nil || !slices.Equal(ids(p), tc.want) || p.HasMore != tc.hasMore || p.Limit != tc.wantLimit || p.Offset != tc.wantOffset || p.Object != "list" {
			t.Errorf("%s: List = %v %+v, %v; want %v has_more=%v limit=%d", tc.rule, ids(p), p, err, tc.want, tc.hasMore, tc.wantLimit)
		}
	}
	if p, _ := ops.List("", 0, 10); !p.Data[0].Compacting || p.Data[1].Compacting {
		t.Errorf("Compacting is not asked per record: %+v", p.Data)
	}

	for _, tc := range []struct {
		rule, id, namespace string
		want                int // matches; 0: not found
	}{
		{"an id in two namespaces shows both", "a", "", 2},
		{"a namespace picks one", "a", a1.Namespace, 1},
		{"an id absent from the namespace is not found", "b", a2.Namespace, 0},
		{"an unknown id is not found", "nobody", "", 0},
	} {
		got, err := ops.Show(tc.id, tc.namespace)
		switch {
		case tc.want == 0 && (!errors.Is(err, admin.ErrConversationNotFound) || !strings.Contains(err.Error(), `"`+tc.id+`"`)):
			t.Errorf("%s: Show err = %v, want not found naming the id", tc.rule, err)
		case tc.want > 0 && (err != nil || len(got) != tc.want):
			t.Errorf("%s: Show = %d, %v; want %d", tc.rule, len(got), err, tc.want)
		}
	}

	if n, err := ops.Compact("a", a2.Namespace); err != nil || n != 1 {
		t.Fatalf("Compact in a namespace = %d, %v", n, err)
	}
	if r1, _, _ := st.Get(a1); r1.ForceNext {
		t.Error("Compact in one namespace marked the other")
	}
	if r2, _, _ := st.Get(a2); !r2.ForceNext {
		t.Error("Compact did not mark the record")
	}
	if _, err := ops.Compact("nobody", ""); !errors.Is(err, admin.ErrConversationNotFound) {
		t.Errorf("Compact of an unknown id: %v", err)
	}
	if ns, err := ops.Forget("a", ""); err != nil || len(ns) != 2 {
		t.Fatalf("Forget in every namespace = %v, %v", ns, err)
	}
	if _, err := ops.Forget("a", ""); !errors.Is(err, admin.ErrConversationNotFound) {
		t.Errorf("Forget of a forgotten id: %v", err)
	}

	none := admin.Conversations{}
	if p, err := none.List("", 0, 10); err != nil || len(p.Data) != 0 || p.Data == nil {
		t.Errorf("no store: List = %+v, %v; want an empty page", p, err)
	}
	for name, op := range map[string]func() error{
		"Show":    func() error { _, err := none.Show("a", ""); return err },
		"Forget":  func() error { _, err := none.Forget("a", ""); return err },
		"Compact": func() error { _, err := none.Compact("a", ""); return err },
	} {
		if err := op(); !errors.Is(err, admin.ErrConversationNotFound) {
			t.Errorf("no store: %s err = %v, want not found", name, err)
		}
	}
}

// A store that cannot be written is an error of Compact and Forget, not an
// unknown conversation.
func TestConversationsWriteFailureIsNotNotFound(t *testing.T) {
	st, _, _, _ := convFixture(t, true)
	ops := admin.Conversations{Store: st}
	if n, err := ops.Compact("a", ""); err == nil || errors.Is(err, admin.ErrConversationNotFound) || n != 0 {
		t.Errorf("Compact on a read-only store = %d, %v; want a store error", n, err)
	}
	if ns, err := ops.Forget("a", ""); err == nil || errors.Is(err, admin.ErrConversationNotFound) || len(ns) != 0 {
		t.Errorf("Forget on a read-only store = %v, %v; want a store error", ns, err)
	}
}

// POST conversations/{id}/compact on a store that cannot be written answers
// 500 store_error: it used to answer 404 "no such conversation" for a
// conversation that exists.
func TestCompactAPIStoreFailureIsNotA404(t *testing.T) {
	st, _, _, _ := convFixture(t, true)
	p := startProxyWith(t, Config{Upstream: "http://127.0.0.1:1/v1"}, Deps{Store: st})
	code, body := adminDo(t, http.MethodPost, p.URL+"/ctxpress/conversations/a/compact", nil)
	if code != http.StatusInternalServerError || !strings.Contains(string(body), `"store_error"`) {
		t.Fatalf("compact on a read-only store: %d %s; want 500 store_error", code, body)
	}
	if code, body := adminDo(t, http.MethodPost, p.URL+"/ctxpress/conversations/nobody/compact", nil); code != http.StatusNotFound {
		t.Fatalf("compact of an unknown id: %d %s; want 404", code, body)
	}
}
