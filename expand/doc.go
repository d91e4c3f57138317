// Package expand is how what ctxpress replaced comes back: the short
// content reference an original is kept under (Ref), the wording of the
// way back a marker gives (Ways), and the line ranges a retrieval asks for
// (ParseLines, Slice). It is pure: the originals themselves live in the
// store (package state), the files in the directory the shell writes.
//
// A marker names only the ways the running configuration has: a file the
// agent can print with sed -n when ctxpress runs on the agent's own
// machine, the ctxpress_expand tool when it is on, an HTTP URL when one is
// configured for agents; with none of them, the reference alone (the user
// can still run `ctxpress expand REF`).
package expand
