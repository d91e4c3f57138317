package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/expand"
	"github.com/ctxpress/ctxpress/state"
)

const expandUsage = `Usage:
  ctxpress expand REF [--lines A-B] [--key KEY | --namespace NS]

Prints the original ctxpress kept under REF (the reference a squash, dedup or
prune marker gives) exactly as it was, or only lines A-B of it, as
sed -n 'A,Bp' prints them ("A" for one line, "A-" to the end).

Flags (anywhere after the sub-command):
  --lines A-B          only these lines (1-based)
  --key KEY            only the originals of this client: one of auth.keys, or
                       without auth.keys the key the client sends (its provider key)
  --namespace NS       only the originals of this namespace (as conversations shows it)
  --db FILE            conversation db (default: the config's db, env CTXPRESS_DB, else the
                       one serve uses: ctxpress.db in the user data directory)
  --config FILE        config file, for db, state, listen and admin_token (env CTXPRESS_CONFIG)
  --server URL         use a running ctxpress's admin API, e.g. http://127.0.0.1:8484
  --admin-token TOKEN  admin token for --server (default: the config's admin_token)

Without --key or --namespace it looks in every namespace: the operator's view.
While ctxpress serves from the db, it asks that server's admin API, as
ctxpress conversations does; with state.backend redis it reads Redis.
`

// expandFlags are the options of `ctxpress expand`.
type expandFlags struct {
	lines, key, namespace, db, config, server, token string
}

func cmdExpand(args []string, stdout, stderr io.Writer) int {
	var f expandFlags
	fs := flag.NewFlagSet("expand", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.lines, "lines", "", "")
	fs.StringVar(&f.key, "key", "", "")
	fs.StringVar(&f.namespace, "namespace", "", "")
	fs.StringVar(&f.db, "db", "", "")
	fs.StringVar(&f.config, "config", "", "")
	fs.StringVar(&f.server, "server", "", "")
	fs.StringVar(&f.token, "admin-token", "", "")
	pos, err := parseInterleaved(fs, args)
	usageError := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "ctxpress expand: "+format+"\n\n%s", append(args, expandUsage)...)
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, expandUsage)
		return 0
	case err != nil:
		return usageError("%v", err)
	case len(pos) != 1:
		return usageError("want one REF, got %d arguments", len(pos))
	case !expand.ValidRef(pos[0]):
		return usageError("%q is not a reference: want the %d lowercase hex digits a marker gives", pos[0], expand.RefLen)
	case f.key != "" && f.namespace != "":
		return usageError("--key and --namespace both name a namespace: give one")
	}
	ref := pos[0]
	lines, err := expand.ParseLines(f.lines)
	if err != nil {
		return usageError("--lines %q: %v", f.lines, err)
	}
	text, err := lookUpOriginal(f, ref)
	if err != nil {
		fmt.Fprintf(stderr, "ctxpress expand: %v\n", err)
		return 1
	}
	if _, err := io.WriteString(stdout, expand.Slice(text, lines)); err != nil {
		fmt.Fprintf(stderr, "ctxpress expand: writing: %v\n", err)
		return 1
	}
	return 0
}

// lookUpOriginal finds the text kept under ref where f says: Redis, the db
// file, or a running server (storeOrServer).
func lookUpOriginal(f expandFlags, ref string) (string, error) {
	c, err := cliConfig(f.config, f.db)
	if err != nil {
		return "", err
	}
	namespaces, where := []string{""}, "in any namespace"
	switch {
	case f.namespace != "":
		namespaces, where = []string{f.namespace}, "in namespace "+f.namespace
	case f.key != "":
		if len(c.Auth.Keys) > 0 && !slices.Contains(c.Auth.Keys, f.key) {
			return "", errors.New("--key: not one of the config's auth.keys")
		}
		namespaces, where = keyNamespaces(c, f.key), "for that key"
	}
	notFound := fmt.Errorf("no original kept under %s %s: it was never kept, or was removed past the retention or the size cap (expand.max_bytes)", ref, where)
	var st state.Store
	var api *apiBackend
	switch {
	case f.server == "" && c.State.Backend == backendRedis:
		st, err = state.OpenRedis(state.RedisOptions{URL: c.State.URL, Prefix: c.State.Prefix,
			ReadTimeout: c.State.ReadTimeout, WriteTimeout: c.State.WriteTimeout, SweepInterval: -1})
	case f.server == "" && c.State.Backend == backendMemory:
		api, err = pingedAPI(serverURL(c.Listen), cmp.Or(f.token, c.AdminToken))
		if err != nil {
			err = fmt.Errorf("state is kept in memory (state.backend memory), and no ctxpress answers at %s: %v; pass --server URL", serverURL(c.Listen), err)
		}
	default:
		st, api, err = storeOrServer(c, f.db != "", f.server, cmp.Or(f.token, c.AdminToken), false)
	}
	if err != nil {
		return "", err
	}
	if st != nil {
		defer st.Close()
	}
	for _, ns := range namespaces {
		var o expand.Original
		var ok bool
		switch {
		case api != nil:
			o.Text, ok, err = api.original(ref, ns)
		case ns == "":
			if finder, finds := st.(state.OriginalFinder); finds {
				o, ok, err = finder.FindOriginal(ref)
			}
		default:
			o, ok, err = st.GetOriginal(ns, ref)
		}
		if err != nil || ok {
			return o.Text, err
		}
	}
	return "", notFound
}

// original asks the admin API for the original kept under ref, in ns or
// in any namespace when ns is ""; ok is false when there is none.
func (b *apiBackend) original(ref, ns string) (text string, ok bool, err error) {
	path := "/originals/" + ref
	if ns != "" {
		path += "?namespace=" + url.QueryEscape(ns)
	}
	status, body, err := b.fetch(http.MethodGet, path)
	if err == nil && status == http.StatusNotFound && strings.Contains(string(body), `"`+admin.CodeOriginalNotFound+`"`) {
		return "", false, nil
	}
	if err == nil {
		err = b.answerError(http.MethodGet, path, status, body)
	}
	return string(body), err == nil, err
}

// keyNamespaces are the namespaces of the conversations of a client that
// presents key, as the server names them (proxy's authenticate and
// namespace modes): with auth.keys, the key's, however the client sends
// it; without, the one of the header that carries it, which for the
// default (authorization) is the Authorization header as a Bearer token,
// or x-api-key when a client sends no Authorization (Claude Code).
func keyNamespaces(c config, key string) []string {
	if len(c.Auth.Keys) > 0 {
		return []string{state.Namespace([]byte("Bearer " + key))}
	}
	switch f := strings.Fields(c.Namespace); {
	case len(f) == 1 && strings.EqualFold(f[0], "none"):
		return []string{state.Namespace(nil)}
	case len(f) == 2 && f[1] != "Authorization":
		return []string{state.Namespace([]byte("header " + f[1] + "\x00" + key))}
	}
	return []string{state.Namespace([]byte("Bearer " + key)), state.Namespace([]byte("x-api-key\x00" + key))}
}
