package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ctxpress/ctxpress/admin"
)

const healthcheckUsage = `Usage: ctxpress healthcheck [--addr HOST:PORT] [--timeout D]

Asks a running ctxpress for /ctxpress/healthz and exits 0 when it answers
ok, 1 otherwise. The address is serve's listen address (the config file of
CTXPRESS_CONFIG, then CTXPRESS_LISTEN) unless --addr gives one; a wildcard
host (0.0.0.0, ::) is asked on 127.0.0.1. It is the Docker image's
HEALTHCHECK: the image has no shell, curl or wget.
`

// cmdHealthcheck is `ctxpress healthcheck`.
func cmdHealthcheck(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, healthcheckUsage) }
	addr := fs.String("addr", "", "")
	timeout := fs.Duration("timeout", 3*time.Second, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	listen := *addr
	if listen == "" {
		// The listen address as serve resolves it, so the check follows a
		// mounted config file as well as the image's environment.
		cfg, _, err := loadConfig(newServeFlags(), getenv)
		if err != nil {
			fmt.Fprintf(stderr, "ctxpress healthcheck: %v\n", err)
			return 1
		}
		listen = cfg.Listen
	}
	url := serverURL(listen) + admin.Prefix + "healthz"
	if err := checkHealth(url, *timeout); err != nil {
		fmt.Fprintf(stderr, "ctxpress healthcheck: %s: %v\n", url, err)
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// checkHealth GETs url and reports whether ctxpress's healthz answered ok.
func checkHealth(url string, timeout time.Duration) error {
	// Never through HTTP_PROXY: the listener checked is this machine's.
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	var body struct {
		Status string `json:"status"`
	}
	// A 200 from something else on the port is not ctxpress being healthy.
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<12)).Decode(&body); err != nil || body.Status != "ok" {
		return errors.New("not ctxpress's healthz answer")
	}
	return nil
}
