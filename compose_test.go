package main

// docker-compose.yml read as Compose reads it (YAML with merge keys, then
// ${VAR:-default} from the shell's environment), checked against the
// Dockerfile's environment and ctxpress's own config loading: no Docker
// engine runs here.

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Build *struct {
		Context string            `yaml:"context"`
		Args    map[string]string `yaml:"args"`
	} `yaml:"build"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	ExtraHosts  []string          `yaml:"extra_hosts"`
}

// readCompose is docker-compose.yml with host's environment interpolated.
func readCompose(t *testing.T, host map[string]string) composeFile {
	t.Helper()
	data, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	in := func(s string) string { return interpolate(t, s, host) }
	for name, s := range c.Services {
		for k, v := range s.Environment {
			s.Environment[k] = in(v)
		}
		for i := range s.Ports {
			s.Ports[i] = in(s.Ports[i])
		}
		for i := range s.Volumes {
			s.Volumes[i] = in(s.Volumes[i])
		}
		if s.Build != nil {
			for k, v := range s.Build.Args {
				s.Build.Args[k] = in(v)
			}
		}
		c.Services[name] = s
	}
	return c
}

var composeVar = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate expands Compose's $VAR, ${VAR}, ${VAR:-default},
// ${VAR-default}, ${VAR:?error} and $$ from env.
func interpolate(t *testing.T, s string, env map[string]string) string {
	t.Helper()
	return composeVar.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		g := composeVar.FindStringSubmatch(m)
		name, op, arg := g[1], g[2], g[3]
		if name == "" {
			name = g[4]
		}
		v, set := env[name]
		switch op {
		case ":-":
			if v == "" {
				return arg
			}
		case "-":
			if !set {
				return arg
			}
		case ":?", "?":
			if v == "" {
				t.Fatalf("compose needs %s: %s", name, arg)
			}
		}
		return v
	})
}

// publishedPort is one ports: entry, [IP:]HOST:CONTAINER.
type publishedPort struct{ ip, host, container string }

func parsePort(t *testing.T, s string) publishedPort {
	t.Helper()
	s = strings.TrimSuffix(s, "/tcp")
	var p publishedPort
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		p.ip, s = s[1:end], strings.TrimPrefix(s[end+1:], ":")
	}
	f := strings.Split(s, ":")
	switch {
	case p.ip == "" && len(f) == 3:
		p.ip, p.host, p.container = f[0], f[1], f[2]
	case len(f) == 2:
		p.host, p.container = f[0], f[1]
	case len(f) == 1:
		p.container = f[0]
	default:
		t.Fatalf("ports: %q", s)
	}
	return p
}

// mount is one volumes: entry, SOURCE:TARGET[:MODE].
func mount(t *testing.T, s string) (source, target string) {
	t.Helper()
	f := strings.Split(s, ":")
	if len(f) < 2 {
		t.Fatalf("volumes: %q is not SOURCE:TARGET", s)
	}
	return f[0], f[1]
}

// Every port the compose file publishes is on the host's loopback: a
// proxy without auth.keys spends its owner's key for whoever reaches it.
func TestComposePublishesOnLoopbackOnly(t *testing.T) {
	c := readCompose(t, nil)
	if len(c.Services) == 0 {
		t.Fatal("no services")
	}
	for name, s := range c.Services {
		for _, raw := range s.Ports {
			p := parsePort(t, raw)
			if ip := net.ParseIP(p.ip); ip == nil || !ip.IsLoopback() {
				t.Errorf("%s publishes %q beyond the host's loopback", name, raw)
			}
		}
	}
}

// composeRun is one ctxpress service as its container sees it.
type composeRun struct {
	name    string
	svc     composeService
	env     map[string]string // the image's ENV, then the service's
	cfgPath string            // CTXPRESS_CONFIG's file, on this machine
}

// ctxpressServices is every service built from the Dockerfile.
func ctxpressServices(t *testing.T, c composeFile) []composeRun {
	t.Helper()
	image := readDockerImage(t).final.env(t)
	var out []composeRun
	for name, s := range c.Services {
		if s.Build == nil {
			continue
		}
		r := composeRun{name: name, svc: s, env: map[string]string{}}
		for k, v := range image {
			r.env[k] = v
		}
		for k, v := range s.Environment {
			r.env[k] = v
		}
		for _, v := range s.Volumes {
			src, dst := mount(t, v)
			if dst == r.env["CTXPRESS_CONFIG"] {
				r.cfgPath = src
				if !filepath.IsAbs(src) {
					r.cfgPath = filepath.Join(s.Build.Context, src)
				}
			}
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		t.Fatal("no service builds the Dockerfile")
	}
	return out
}

// load is the config the container's ctxpress serves with.
func (r composeRun) load(t *testing.T) config {
	t.Helper()
	env := map[string]string{}
	for k, v := range r.env {
		env[k] = v
	}
	if env["CTXPRESS_CONFIG"] != "" {
		if r.cfgPath == "" {
			t.Fatalf("%s: CTXPRESS_CONFIG=%s is mounted from nowhere", r.name, env["CTXPRESS_CONFIG"])
		}
		env["CTXPRESS_CONFIG"] = r.cfgPath
	}
	cfg, _, err := loadConfig(newServeFlags(), envOf(env))
	if err != nil {
		t.Fatalf("%s: ctxpress would not start: %v", r.name, err)
	}
	return cfg
}

// The documented setup works from the host: the container listens where
// the published port reaches it, says where that is so the security
// warning stays quiet, reaches the host's model servers, keeps its db on a
// named volume and reads the mounted config file.
func TestComposeServicesRunFromTheHost(t *testing.T) {
	c := readCompose(t, nil)
	var published []publishedPort
	for _, s := range c.Services {
		for _, raw := range s.Ports {
			published = append(published, parsePort(t, raw))
		}
	}
	for _, r := range ctxpressServices(t, c) {
		t.Run(r.name, func(t *testing.T) {
			cfg := r.load(t)
			listen, err := net.ResolveTCPAddr("tcp", cfg.Listen)
			if err != nil || !listen.IP.IsUnspecified() {
				t.Fatalf("listens on %q: a published port reaches only a container listening on every interface", cfg.Listen)
			}
			_, port, _ := net.SplitHostPort(cfg.Listen)

			// CTXPRESS_PUBLISHED_ADDR is this service's own published port,
			// or, for a replica behind the load balancer, the balancer's.
			pub := r.env[envPublishedAddr]
			found := false
			for _, raw := range r.svc.Ports {
				p := parsePort(t, raw)
				if p.container == port {
					found = true
					if want := net.JoinHostPort(p.ip, p.host); pub != want {
						t.Errorf("%s=%q, but the port is published on %s", envPublishedAddr, pub, want)
					}
				}
			}
			if !found && len(r.svc.Ports) > 0 {
				t.Errorf("ports %v: none reaches the container's %s", r.svc.Ports, port)
			}
			if !found {
				known := false
				for _, p := range published {
					known = known || net.JoinHostPort(p.ip, p.host) == pub
				}
				if !known {
					t.Errorf("%s=%q: no service publishes that", envPublishedAddr, pub)
				}
			}
			if msg := exposureWarning(listen, len(cfg.Auth.Keys), pub); msg != "" {
				t.Errorf("the documented setup logs the security warning: %s", msg)
			}

			hostGateway := false
			for _, h := range r.svc.ExtraHosts {
				hostGateway = hostGateway || h == "host.docker.internal:host-gateway"
			}
			if !hostGateway {
				t.Errorf("extra_hosts %v: host.docker.internal does not reach the host on Linux", r.svc.ExtraHosts)
			}

			if cfg.State.Backend == backendBolt {
				dir := filepath.Dir(cfg.DB)
				onVolume := false
				for _, v := range r.svc.Volumes {
					src, dst := mount(t, v)
					_, named := c.Volumes[src]
					onVolume = onVolume || named && dst == dir
				}
				if !onVolume {
					t.Errorf("the db %s is on no named volume: it goes with the container", cfg.DB)
				}
			}
		})
	}
}

// What the shell sets reaches ctxpress; what it leaves unset leaves the
// mounted config file in charge.
func TestComposeEnvironmentReachesTheConfig(t *testing.T) {
	run := func(host map[string]string) config {
		t.Helper()
		for _, r := range ctxpressServices(t, readCompose(t, host)) {
			if r.name == "ctxpress" {
				return r.load(t)
			}
		}
		t.Fatal("no ctxpress service")
		return config{}
	}
	d := defaultConfig()

	// Nothing set: the defaults, from the shipped (empty) config file.
	cfg := run(nil)
	if cfg.Upstream != d.Upstream || cfg.AdminToken != "" || cfg.LocalUpstream != "auto" || len(cfg.Auth.Keys) != 0 {
		t.Errorf("nothing set: upstream %q, admin token %q, local_upstream %q, auth keys %v",
			cfg.Upstream, cfg.AdminToken, cfg.LocalUpstream, cfg.Auth.Keys)
	}

	// LM Studio on the host, the admin side open to the host with a token.
	cfg = run(map[string]string{
		"CTXPRESS_UPSTREAM":         "http://host.docker.internal:1234/v1",
		"CTXPRESS_LOCAL_UPSTREAM":   "true",
		"CTXPRESS_ADMIN_TOKEN":      "adm",
		"CTXPRESS_UPSTREAM_API_KEY": "sk-up",
		"CTXPRESS_AUTH_KEYS":        "k1,k2",
	})
	if cfg.Upstream != "http://host.docker.internal:1234/v1" || cfg.AdminToken != "adm" ||
		cfg.UpstreamAPIKey != "sk-up" || len(cfg.Auth.Keys) != 2 {
		t.Errorf("from the shell: upstream %q, admin token %q, upstream key %q, auth keys %v",
			cfg.Upstream, cfg.AdminToken, cfg.UpstreamAPIKey, cfg.Auth.Keys)
	}
	if local := cfg.proxyConfig().LocalUpstream; local == nil || !*local {
		t.Errorf("CTXPRESS_LOCAL_UPSTREAM=true: the proxy's LocalUpstream is %v", local)
	}

	// A config file of the user's, and nothing in the shell: the file's
	// values, not defaults the compose file would put in the environment.
	own := filepath.Join(t.TempDir(), "my-ctxpress.yml")
	if err := os.WriteFile(own, []byte("upstream: http://host.docker.internal:11434/v1\nlocal_upstream: \"true\"\nadmin_token: from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = run(map[string]string{"CTXPRESS_CONFIG_FILE": own})
	if cfg.Upstream != "http://host.docker.internal:11434/v1" || cfg.LocalUpstream != "true" || cfg.AdminToken != "from-file" {
		t.Errorf("CTXPRESS_CONFIG_FILE: upstream %q, local_upstream %q, admin token %q: the file lost to the compose file's environment",
			cfg.Upstream, cfg.LocalUpstream, cfg.AdminToken)
	}

	// The version the binary reports comes from the shell too.
	for _, r := range ctxpressServices(t, readCompose(t, map[string]string{"CTXPRESS_VERSION": "v1.2.3"})) {
		if got := r.svc.Build.Args["VERSION"]; got != "v1.2.3" {
			t.Errorf("%s: build arg VERSION %q with CTXPRESS_VERSION=v1.2.3", r.name, got)
		}
	}
}

func TestInterpolate(t *testing.T) {
	env := map[string]string{"SET": "v", "EMPTY": ""}
	for in, want := range map[string]string{
		"${SET}": "v", "$SET": "v", "${UNSET}": "", "${UNSET:-d}": "d", "${EMPTY:-d}": "d",
		"${EMPTY-d}": "", "${UNSET-d}": "d", "$${SET}": "${SET}", "a:${SET:-x}:b": "a:v:b",
	} {
		if got := interpolate(t, in, env); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
