package checkpoint

import "github.com/gocheckpoint/checkpoint/internal/format"

// The format's names the store's tests use.
var (
	sniff         = format.Sniff
	parseEnvelope = format.ParseEnvelope
	appendTrailer = format.AppendTrailer
	verify        = format.Verify
	zstdMagic     = format.ZstdMagic
	gzipMagic     = format.GzipMagic
	trailerV2     = format.TrailerV2
	trailerLenV2  = format.TrailerLenV2
)

const (
	maxPooled       = format.MaxPooled
	zstdWindow      = format.ZstdWindow
	maxZstdWindow   = format.MaxZstdWindow
	maxStreamBuffer = format.MaxStreamBuffer
	streamPrefix    = format.StreamPrefix
	collectAfter    = format.CollectAfter
)
