package system

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeFile is the part of docker-compose.yml this test reads.
type composeFile struct {
	Services map[string]struct {
		Profiles    []string          `yaml:"profiles"`
		Build       composeBuild      `yaml:"build"`
		Image       string            `yaml:"image"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   composeDeps       `yaml:"depends_on"`
	} `yaml:"services"`
}

// composeBuild is build:'s context, given alone or in a map.
type composeBuild string

func (b *composeBuild) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*b = composeBuild(n.Value)
		return nil
	}
	var m struct {
		Context string `yaml:"context"`
	}
	err := n.Decode(&m)
	*b = composeBuild(m.Context)
	return err
}

// composeDeps is depends_on:'s services, listed or as a map's keys (with
// their conditions).
type composeDeps []string

func (d *composeDeps) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		return n.Decode((*[]string)(d))
	}
	var m map[string]yaml.Node
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k := range m {
		*d = append(*d, k)
	}
	return nil
}

// docker-compose.yml parses; its default service is the single ctxpress
// on bbolt, and its replicas profile is two ctxpress on one Redis behind
// nginx, whose config (deploy/nginx.conf) balances exactly those two.
// (Where docker is installed, `docker compose config` checks the rest.)
func TestComposeReplicasProfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	single := c.Services["ctxpress"]
	// Its db is the image's (CTXPRESS_DB in the Dockerfile), on a volume:
	// the root package's compose tests check that.
	if len(single.Profiles) != 0 || single.Build != "." || single.Environment["CTXPRESS_REDIS_URL"] != "" {
		t.Fatalf("the default service is no longer the single ctxpress on its db: %+v", single)
	}
	var replicas []string
	for name, s := range c.Services {
		if name == "ctxpress" {
			continue
		}
		if !slices.Equal(s.Profiles, []string{"replicas"}) {
			t.Errorf("service %s is not in the replicas profile alone: %v", name, s.Profiles)
		}
		if s.Build == "." {
			if s.Environment["CTXPRESS_REDIS_URL"] != "redis://redis:6379/0" || !slices.Contains(s.DependsOn, "redis") {
				t.Errorf("replica %s does not share the redis service: %+v", name, s)
			}
			if s.Environment["CTXPRESS_REPLICA"] != name {
				t.Errorf("replica %s is named %q in its events, want its service name", name, s.Environment["CTXPRESS_REPLICA"])
			}
			replicas = append(replicas, name)
		}
	}
	if len(replicas) != 2 {
		t.Fatalf("replicas profile has %d ctxpress services, want 2", len(replicas))
	}
	lb := c.Services["lb"]
	if !slices.Contains(lb.Volumes, "./deploy/nginx.conf:/etc/nginx/nginx.conf:ro") {
		t.Fatalf("lb does not mount deploy/nginx.conf: %v", lb.Volumes)
	}
	conf, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var servers []string
	for _, m := range regexp.MustCompile(`(?m)^\s*server (\S+):8484;`).FindAllSubmatch(conf, -1) {
		servers = append(servers, string(m[1]))
	}
	slices.Sort(servers)
	slices.Sort(replicas)
	if !slices.Equal(servers, replicas) {
		t.Fatalf("deploy/nginx.conf balances %v, the profile runs %v", servers, replicas)
	}
	if c.Services["redis"].Image == "" || !slices.Contains(lb.DependsOn, replicas[0]) {
		t.Fatalf("the profile lacks redis, or lb does not wait for the replicas")
	}
}
