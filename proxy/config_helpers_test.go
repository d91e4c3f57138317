package proxy

import (
	"github.com/ctxpress/ctxpress/compaction"
	"github.com/ctxpress/ctxpress/rewrite"
	"github.com/ctxpress/ctxpress/squash"
	"github.com/ctxpress/ctxpress/wire/chat"
)

// unprobed is cfg with its upstream taken for a local model server when
// cfg does not say what it is: the tests' fakes on loopback stand for one,
// and are not probed at startup (the probe's requests would reach the
// fakes the tests count). The probe has tests of its own (classify_test).
func unprobed(cfg Config) Config {
	if cfg.LocalUpstream == nil {
		local := true
		cfg.LocalUpstream = &local
	}
	return cfg
}

func compactionConfig(upstream string) Config {
	return Config{Upstream: upstream, Compaction: compaction.Config{
		Enabled: true,
		Trigger: rewrite.TriggerConfig{ThresholdTokens: testTrigger},
	}}
}

func pipelineForTest() *rewrite.Pipeline {
	return rewrite.New(rewrite.Config{
		Format: chat.Format{},
		Squash: &squash.Config{}, // the pipeline's own token counter, as in production
		Dedup:  rewrite.DefaultDedupConfig(),
	})
}
