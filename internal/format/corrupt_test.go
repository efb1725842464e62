package format_test

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/format/corpus"
	"github.com/stretchr/testify/require"
)

type corpusState struct {
	Turn   int64             `json:"turn"`
	Agents map[string]string `json:"agents"`
	Log    []string          `json:"log"`
}

// TestCorruptCorpusNeverReadsAsAnotherState reads every file of the corrupt
// corpus as a load does, buffered and streamed, with the check a store
// makes (the header must be the one its name promises): each is refused
// with ErrCorrupt, or reads as the good state it was made from (damage to a
// gzip header field changes nothing). The store's corpus test loads the
// same files, and non-regular entries beside them, through a store.
func TestCorruptCorpusNeverReadsAsAnotherState(t *testing.T) {
	t.Parallel()
	want := corpusState{Turn: 2, Agents: map[string]string{"dm": "narrates", "ana": "sneaks"}, Log: []string{"a", "b"}}
	state, err := json.Marshal(want)
	require.NoError(t, err)
	named := func(h format.Header) error {
		if h.Step != corpus.Step || h.Kind != format.KindStep {
			return format.Damaged("header says step %d kind %q, name says step %d kind %q", h.Step, h.Kind, corpus.Step, format.KindStep)
		}
		return nil
	}
	cases := corpus.Cases(state)
	intact := 0
	for _, tc := range cases {
		for _, streamed := range []bool{false, true} {
			c := format.NewCodec(format.CompressNone, corpus.MaxRead)
			var got corpusState
			if streamed {
				reopen := func() (io.ReadCloser, int64, error) {
					return io.NopCloser(bytes.NewReader(tc.Data)), int64(len(tc.Data)), nil
				}
				_, err = c.LoadState(bytes.NewReader(tc.Data), int64(len(tc.Data)), &format.Schema{}, named, &got, reopen)
			} else {
				err = c.Read(bytes.NewReader(tc.Data), int64(len(tc.Data)), func(h format.Header, state []byte) error {
					if err := named(h); err != nil {
						return err
					}
					return (&format.Schema{}).Decode(h.Schema, state, &got)
				})
			}
			if err == nil {
				require.Equal(t, want, got, tc.Name)
				intact++
				continue
			}
			require.ErrorIs(t, err, format.ErrCorrupt, "%s (streamed %v)", tc.Name, streamed)
			if streamed {
				require.Zero(t, got, "%s: a failed load left a state", tc.Name)
			}
		}
	}
	t.Logf("%d damaged files read twice each: none read as another state; %d reads of harmless changes read the good state", len(cases), intact)
	require.Greater(t, len(cases), 1000)
}
