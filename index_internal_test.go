package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseIndex feeds checkIndex and entries damaged indexes: they must
// return nil or entries, never panic, and decoding an entry must not panic
// either.
func FuzzParseIndex(f *testing.F) {
	dir := f.TempDir()
	s, err := Open[int](dir, NoSync())
	if err != nil {
		f.Fatal(err)
	}
	for step := int64(1); step <= 3; step++ {
		if _, err := s.Save(context.Background(), step, int(step)); err != nil {
			f.Fatal(err)
		}
	}
	s.writeIndex(context.Background())
	s.Close()
	good, err := os.ReadFile(filepath.Join(dir, indexName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(indexMagic + "end 0 00000000\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fn, _ := layout{prefix: "step", digits: 8}.parse("step_00000001.json")
		every := func(name []byte) (string, bool) { return string(name), true }
		for _, x := range checkIndex(data).entries(every) {
			x.decode(fn)
		}
		// The same bytes as the body of an index whose checksum and count
		// hold, so that the lines themselves are parsed and decoded.
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			body := append([]byte(indexMagic), data[:i+1]...)
			sealed := fmt.Appendf(body, "end %d %08x\n", bytes.Count(data[:i+1], []byte{'\n'}), crc32.Checksum(body, indexCRC))
			for _, x := range checkIndex(sealed).entries(every) {
				x.decode(fn)
			}
		}
	})
}
