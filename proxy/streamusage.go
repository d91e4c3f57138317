package proxy

import (
	"sync"

	"github.com/valyala/fasthttp"
)

// askStreamUsage asks a streamed body of api's format for its usage, when
// the format's streams do not always carry it (api.askStreamUsage: chat's
// usage chunk, see chat.EnsureStreamUsage), unless the upstream has
// refused that field for the model. When it changed the body, retry undoes
// the change if the upstream refuses stream_options, and remembers the
// model, so that later streams to it go as the client sent them (without
// usage, so without calibration from them).
func (s *Server) askStreamUsage(api *api, body []byte, model string) (out []byte, retry refusalHook) {
	if api.askStreamUsage == nil || s.noStreamOptions.has(model) {
		return body, nil
	}
	out, injected := api.askStreamUsage(body)
	if !injected {
		return body, nil
	}
	return out, func(status int, _ *fasthttp.ResponseHeader, answer []byte) ([]byte, bool) {
		if !api.streamOptionsRefused(status, answer) {
			return nil, false
		}
		if s.noStreamOptions.add(model) {
			s.log.Warn().Str("model", model).Int("status", status).
				Msg("the upstream refuses stream_options; streams to this model are sent as the client sends them, without asking for usage")
		}
		return body, true
	}
}

// modelSet is the models for which the one upstream refused the
// stream_options ctxpress adds, for the life of the process.
type modelSet struct {
	mu     sync.Mutex
	models map[string]struct{} // guarded by mu
}

// maxRefusingModels bounds the set: model names come from clients.
const maxRefusingModels = 1024

func (m *modelSet) has(model string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.models[model]
	return ok
}

// add reports whether model is new to the set.
func (m *modelSet) add(model string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.models[model]; ok || len(m.models) >= maxRefusingModels {
		return false
	}
	if m.models == nil {
		m.models = map[string]struct{}{}
	}
	m.models[model] = struct{}{}
	return true
}
