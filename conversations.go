package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ctxpress/ctxpress/admin"
	"github.com/ctxpress/ctxpress/state/recorder"

	"github.com/rs/zerolog"

	"github.com/ctxpress/ctxpress/proxy"
	"github.com/ctxpress/ctxpress/state"
)

const conversationsUsage = `Usage:
  ctxpress conversations list [--offset N] [--limit N]
  ctxpress conversations show ID
  ctxpress conversations rm ID
  ctxpress conversations compact ID      compact on the conversation's next request

Flags (anywhere after the sub-command):
  --db FILE            conversation db (default: the config's db, env CTXPRESS_DB, else the
                       one serve uses: ctxpress.db in the user data directory)
  --config FILE        config file, for db, listen and admin_token (env CTXPRESS_CONFIG)
  --server URL         use a running ctxpress's admin API, e.g. http://127.0.0.1:8484
  --admin-token TOKEN  admin token for --server (default: the config's admin_token)
  --namespace NS       only the conversation of this namespace (an id may exist in several)
  --json               print JSON (the admin API's shapes) instead of tables

bbolt lets one process write the db. While ctxpress serves from it, the db is
locked: list and show then ask the server's admin API (--server, else the
config's listen address), and so do rm and compact, which need to write.
`

// convFlags are the options of `ctxpress conversations`.
type convFlags struct {
	db, config, server, token, namespace string
	json                                 bool
	offset, limit                        int
}

// lockWait is how long the CLI waits for the db's lock before turning to
// the admin API: a running server holds it for good, so waiting longer
// only delays the answer.
const lockWait = 300 * time.Millisecond

func cmdConversations(args []string, stdout, stderr io.Writer) int {
	var f convFlags
	fs := flag.NewFlagSet("conversations", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.db, "db", "", "")
	fs.StringVar(&f.config, "config", "", "")
	fs.StringVar(&f.server, "server", "", "")
	fs.StringVar(&f.token, "admin-token", "", "")
	fs.StringVar(&f.namespace, "namespace", "", "")
	fs.BoolVar(&f.json, "json", false, "")
	fs.IntVar(&f.offset, "offset", 0, "")
	fs.IntVar(&f.limit, "limit", 50, "")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, conversationsUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ctxpress conversations: %v\n\n%s", err, conversationsUsage)
		return 2
	}
	if len(pos) == 0 {
		pos = []string{"list"}
	}
	cmd, rest := pos[0], pos[1:]
	wantID := cmd == "show" || cmd == "rm" || cmd == "compact"
	switch {
	case cmd != "list" && !wantID:
		fmt.Fprintf(stderr, "ctxpress conversations: unknown command %q\n\n%s", cmd, conversationsUsage)
		return 2
	case wantID && len(rest) != 1, !wantID && len(rest) != 0:
		fmt.Fprintf(stderr, "ctxpress conversations %s: want %s\n\n%s", cmd, map[bool]string{true: "one ID", false: "no argument"}[wantID], conversationsUsage)
		return 2
	}
	b, err := openBackend(f, cmd != "list" && cmd != "show")
	if err != nil {
		fmt.Fprintf(stderr, "ctxpress conversations: %v\n", err)
		return 1
	}
	defer b.close()
	out := convOutput{w: stdout, json: f.json}
	switch cmd {
	case "list":
		page, err := b.list(f.offset, f.limit)
		if err == nil {
			err = out.list(page)
		}
		return report(stderr, err)
	case "show":
		got, err := b.show(rest[0], f.namespace)
		if err == nil {
			err = out.show(got)
		}
		return report(stderr, err)
	case "rm":
		n, err := b.rm(rest[0], f.namespace)
		if err == nil {
			err = out.done(map[string]any{"id": rest[0], "deleted": n},
				fmt.Sprintf("deleted conversation %q (%d namespace%s)", rest[0], n, plural(n)))
		}
		return report(stderr, err)
	default: // compact
		n, err := b.compact(rest[0], f.namespace)
		if err == nil {
			err = out.done(map[string]any{"conversation": rest[0], "scheduled": n},
				fmt.Sprintf("conversation %q is compacted on its next request (%d namespace%s)", rest[0], n, plural(n)))
		}
		return report(stderr, err)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func report(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "ctxpress conversations: %v\n", err)
	return 1
}

// parseInterleaved parses flags placed before, between or after the
// positional arguments, as a person types them ("show ID --json").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// backend is where the commands read and write: the db file, or a running
// server's admin API.
type backend interface {
	list(offset, limit int) (admin.ConversationPage, error)
	show(id, namespace string) ([]admin.ConversationDetail, error)
	rm(id, namespace string) (int, error)
	compact(id, namespace string) (int, error)
	close()
}

// openBackend picks the backend: --server when given; else the db file,
// read-only unless write, and the admin API when a running server holds
// it (storeOrServer).
func openBackend(f convFlags, write bool) (backend, error) {
	c, err := cliConfig(f.config, f.db)
	if err != nil {
		return nil, err
	}
	st, api, err := storeOrServer(c, f.db != "", f.server, cmp.Or(f.token, c.AdminToken), write)
	if err != nil {
		return nil, err
	}
	if api != nil {
		return api, nil
	}
	// The turns a crash left in the journal first, so that what this
	// changes is the whole record (a forgotten one stays forgotten).
	recorder.ReplayJournal(st, zerolog.New(os.Stderr).Level(zerolog.WarnLevel))
	return newDBBackend(st, proxy.PricingOf(c.proxyConfig())), nil
}

// cliConfig is the config a command other than serve reads: the file
// (--config, else CTXPRESS_CONFIG), the environment, and db when set.
func cliConfig(configPath, db string) (config, error) {
	sf := newServeFlags()
	sf.configPath = configPath
	if db != "" {
		_ = sf.fs.Set("db", db)
	}
	c, _, err := loadConfig(sf, os.Getenv)
	return c, err
}

// storeOrServer finds where c keeps its state, for a command other than
// serve: the server at server when given; else the db file, read-only
// unless write, and the admin API at c's listen address when a running
// server holds it. The db is found as serve finds it (--db, the config's
// db, CTXPRESS_DB, else the one in the user data directory), so the
// default works from any directory; a missing default db (dbGiven false)
// is no error while a server answers at the listen address (it may keep
// state in memory, or in a db of its own). One of st and api is set.
func storeOrServer(c config, dbGiven bool, server, token string, write bool) (st state.Store, api *apiBackend, err error) {
	if server != "" {
		api, err = newAPIBackend(server, token)
		return nil, api, err
	}
	server = serverURL(c.Listen)
	db := c.DB
	if db == "" {
		return nil, nil, errors.New(`the config keeps state in memory (db: ""); use --server URL to ask the running server`)
	}
	if _, err := os.Stat(db); err != nil {
		if !dbGiven {
			if api, apiErr := pingedAPI(server, token); apiErr == nil {
				return nil, api, nil
			}
		}
		return nil, nil, fmt.Errorf("no db at %s (%w), and no ctxpress answering at %s: pass --db FILE, or --server URL for a running ctxpress", db, err, server)
	}
	st, err = state.OpenBolt(db, state.BoltOptions{ReadOnly: !write, Timeout: lockWait, SweepInterval: -1})
	if err == nil {
		return st, nil, nil
	}
	if !errors.Is(err, state.ErrLocked) {
		return nil, nil, err
	}
	api, apiErr := pingedAPI(server, token)
	if apiErr != nil {
		return nil, nil, fmt.Errorf("%s is locked by another process (a running ctxpress?), and the admin API at %s did not answer: %v\n"+
			"  Pass --server URL with that ctxpress's address (and --admin-token when it sets admin_token), or stop it and retry", db, server, apiErr)
	}
	return nil, api, nil
}

// pingedAPI is the admin API at server, once it answered healthz.
func pingedAPI(server, token string) (*apiBackend, error) {
	api, err := newAPIBackend(server, token)
	if err == nil {
		err = api.ping()
	}
	return api, err
}

// serverURL is the admin API address for a listen address: a wildcard
// host is reached on loopback.
func serverURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// dbBackend works on the db file directly, through the operations the
// admin API uses.
type dbBackend struct {
	st  state.Store
	ops admin.Conversations
}

// newDBBackend works on st, pricing its conversations as the server would.
func newDBBackend(st state.Store, pricing admin.Pricing) *dbBackend {
	return &dbBackend{st: st, ops: admin.Conversations{Store: st, Pricing: pricing}}
}

func (b *dbBackend) close() { _ = b.st.Close() }

func (b *dbBackend) list(offset, limit int) (admin.ConversationPage, error) {
	return b.ops.List("", offset, limit)
}

func (b *dbBackend) show(id, ns string) ([]admin.ConversationDetail, error) {
	return b.ops.Show(id, ns)
}

func (b *dbBackend) rm(id, ns string) (int, error) {
	deleted, err := b.ops.Forget(id, ns)
	return len(deleted), err
}

func (b *dbBackend) compact(id, ns string) (int, error) { return b.ops.Compact(id, ns) }

// apiBackend asks a running ctxpress.
type apiBackend struct {
	base, token string
	client      *http.Client
}

func newAPIBackend(server, token string) (*apiBackend, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want a URL like http://127.0.0.1:8484", server)
	}
	return &apiBackend{base: strings.TrimRight(server, "/") + "/ctxpress", token: token,
		client: &http.Client{Timeout: 10 * time.Second}}, nil
}

func (b *apiBackend) close() {}

func (b *apiBackend) ping() error {
	return b.do(http.MethodGet, "/healthz", nil)
}

// do calls the admin API and decodes the answer into out (when not nil);
// an error answer comes back with the server's message.
func (b *apiBackend) do(method, path string, out any) error {
	status, body, err := b.fetch(method, path)
	if err == nil {
		err = b.answerError(method, path, status, body)
	}
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(body, out)
}

// fetch calls the admin API and returns the answer's status and body.
func (b *apiBackend) fetch(method, path string) (int, []byte, error) {
	req, err := http.NewRequest(method, b.base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer of %s: %w", b.base+path, err)
	}
	return resp.StatusCode, body, nil
}

// answerError is the error of an answer of status, with the server's
// message; nil for a success.
func (b *apiBackend) answerError(method, path string, status int, body []byte) error {
	if status < 300 {
		return nil
	}
	var e struct {
		Error struct{ Message, Code string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	msg := strings.TrimPrefix(e.Error.Message, "ctxpress: ")
	switch {
	case e.Error.Code == "conversation_not_found":
		return admin.ErrConversationNotFound
	case status == http.StatusUnauthorized:
		return fmt.Errorf("%d %s: %s (pass --admin-token, or set admin_token in --config)", status, http.StatusText(status), msg)
	case msg == "":
		return fmt.Errorf("%s %s: %d %s", method, b.base+path, status, http.StatusText(status))
	}
	return fmt.Errorf("%d %s: %s", status, http.StatusText(status), msg)
}

// idPath is the admin API path of conversation id, with suffix (e.g.
// "/compact") after it and the namespace, when set, as the query.
func idPath(id, suffix, ns string) string {
	p := "/conversations/" + url.PathEscape(id) + suffix
	if ns != "" {
		p += "?namespace=" + url.QueryEscape(ns)
	}
	return p
}

func (b *apiBackend) list(offset, limit int) (admin.ConversationPage, error) {
	var p admin.ConversationPage
	err := b.do(http.MethodGet, "/conversations?offset="+strconv.Itoa(offset)+"&limit="+strconv.Itoa(limit), &p)
	return p, err
}

func (b *apiBackend) show(id, ns string) ([]admin.ConversationDetail, error) {
	var got struct {
		Data []admin.ConversationDetail `json:"data"`
	}
	err := b.do(http.MethodGet, idPath(id, "", ns), &got)
	return got.Data, notFoundID(err, id)
}

func (b *apiBackend) rm(id, ns string) (int, error) {
	var got struct {
		Deleted int `json:"deleted"`
	}
	err := b.do(http.MethodDelete, idPath(id, "", ns), &got)
	return got.Deleted, notFoundID(err, id)
}

func (b *apiBackend) compact(id, ns string) (int, error) {
	var got struct {
		Scheduled int `json:"scheduled"`
	}
	err := b.do(http.MethodPost, idPath(id, "/compact", ns), &got)
	return got.Scheduled, notFoundID(err, id)
}

// notFoundID names id in the API's "no such conversation", as the db
// backend's error does.
func notFoundID(err error, id string) error {
	if errors.Is(err, admin.ErrConversationNotFound) {
		return fmt.Errorf("%w %q", admin.ErrConversationNotFound, id)
	}
	return err
}
