module github.com/ctxpress/ctxpress

go 1.26.8

require (
	github.com/openai/openai-go/v3 v3.98.0
	github.com/pkoukk/tiktoken-go v0.1.8
	github.com/pkoukk/tiktoken-go-loader v0.0.2
	github.com/rs/zerolog v1.34.0
	github.com/tidwall/gjson v1.20.2
	github.com/tidwall/sjson v1.2.5
	github.com/valyala/fasthttp v1.78.0
	go.etcd.io/bbolt v1.4.3
	go.yaml.in/yaml/v3 v3.0.4
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/dlclark/regexp2 v1.10.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/mattn/go-colorable v0.1.13 // indirect
	github.com/mattn/go-isatty v0.0.19 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.3.0 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
