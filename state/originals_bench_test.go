package state

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ctxpress/ctxpress/expand"
)

// A turn's originals, store by store: a request that carries twenty
// replaced outputs of a few KB puts them all again (Kept, the usual
// turn), a new one (New, the turn that replaced it), and an agent's
// retrieval reads one (Get).
// go test -run '^$' -bench Originals ./state/
func BenchmarkOriginals(b *testing.B) {
	var turn []expand.Original
	for i := range 20 {
		turn = append(turn, expand.New(expand.KindSquash, "bash", fmt.Sprintf("run %d\n", i)+strings.Repeat("ok  \tpkg/x\t0.01s\n", 200)))
	}
	for _, bo := range benchOpen {
		b.Run(bo.name, func(b *testing.B) {
			s := bo.open(b)
			if err := s.PutOriginals(keyA.Namespace, turn); err != nil {
				b.Fatal(err)
			}
			b.Run("Kept", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := s.PutOriginals(keyA.Namespace, turn); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("New", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					o := expand.New(expand.KindSquash, "bash", fmt.Sprintf("new %d\n", i)+turn[0].Text)
					if err := s.PutOriginals(keyA.Namespace, append(turn[1:], o)); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("Get", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, ok, err := s.GetOriginal(keyA.Namespace, turn[7].Ref); !ok || err != nil {
						b.Fatal(ok, err)
					}
				}
			})
		})
	}
}
