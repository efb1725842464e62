module github.com/gocheckpoint/checkpoint

go 1.26

require (
	filippo.io/age v1.3.2
	github.com/chromedp/chromedp v0.23.0
	github.com/go-json-experiment/json v1.27.2
	github.com/google/go-cmp v0.7.0
	github.com/google/renameio/v2 v2.0.2
	github.com/klauspost/compress v1.20.3
	github.com/stretchr/testify v1.12.1
	golang.org/x/crypto v0.55.0
	golang.org/x/sys v0.47.0
	golang.org/x/term v0.45.0
)

require (
	filippo.io/hpke v0.4.0 // indirect
	github.com/chromedp/cdproto v0.159.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
