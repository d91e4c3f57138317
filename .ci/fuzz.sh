#!/usr/bin/env bash
# Runs every Fuzz* target briefly (FUZZTIME, default 10s each), so a change
# that breaks an invariant the fuzzers check shows up in CI. Targets are found
# by name, so a new one is picked up without editing this file. Failing
# inputs land in the package's testdata/fuzz/ and are replayed by go test.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-10s}"
found=0
while IFS= read -r line; do
	file="${line%%:*}"
	name="$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"${line#*:}")"
	pkg="./$(dirname "$file")/"
	found=$((found + 1))
	echo "fuzz: $name in $pkg for $fuzztime"
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"
done < <(grep -rHE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' . | sed 's|^\./||' | sort)
if [ "$found" -eq 0 ]; then
	echo "fuzz: no Fuzz targets found" >&2
	exit 1
fi
echo "fuzz: $found targets ok"
