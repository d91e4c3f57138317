#!/usr/bin/env bash
# Runs every Fuzz* target briefly (FUZZTIME, default 30000x: executions, not
# seconds, each), so a change that breaks an invariant the fuzzers check
# shows up in CI. Targets are found by name, so a new one is picked up
# without editing this file. Failing inputs land in the package's
# testdata/fuzz/ and are replayed by go test.
set -euo pipefail
cd "$(dirname "$0")/.."
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# fail a target with a bare "context deadline exceeded" when the deadline
# lands while a worker is minimising an input (golang/go#75804, fixed in Go
# 1.27); CI saw it on FuzzApply with no crasher. A count has no deadline.
fuzztime="${FUZZTIME:-30000x}"
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
