package state

import (
	"strings"
	"testing"
)

const smapsSample = `55d0c0a00000-55d0c0a2b000 r--p 00000000 08:01 1311 /usr/bin/ctxpress
Size:                172 kB
Rss:                 172 kB
VmFlags: rd mr mw me dw sd
7f3a10000000-7f3a18000000 r--s 00000000 08:01 4242 /tmp/x/ctxpress.db
Size:             131072 kB
KernelPageSize:        4 kB
Rss:                2048 kB
Pss:                2048 kB
VmFlags: rd sh mr mw me ms sd
7f3a18000000-7f3a18021000 rw-p 00000000 00:00 0
Size:                132 kB
Rss:                  12 kB
`

func TestSmapsGivesTheSizeAndResidentPagesOfTheMapAtAnAddress(t *testing.T) {
	tests := []struct {
		name  string
		addr  uintptr
		want  Mapping
		found bool
	}{
		{"the db's map", 0x7f3a10000000, Mapping{Mapped: 128 << 20, Resident: 2 << 20}, true},
		{"the first map", 0x55d0c0a00000, Mapping{Mapped: 172 << 10, Resident: 172 << 10}, true},
		{"the last map", 0x7f3a18000000, Mapping{Mapped: 132 << 10, Resident: 12 << 10}, true},
		{"an address inside a map is not its start", 0x7f3a10001000, Mapping{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found, err := parseSmaps(strings.NewReader(smapsSample), tt.addr)
			if err != nil || found != tt.found || got != tt.want {
				t.Errorf("parseSmaps(%#x) = %+v, %v, %v; want %+v, %v", tt.addr, got, found, err, tt.want, tt.found)
			}
		})
	}
}
