package benchkit

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// NaiveLatest is the Latest a user would write by hand, the baseline of
// Latest's benchmarks: read the directory's names, take the greatest plain
// checkpoint name with prefix (the steps are zero-padded, so it is the
// newest step), and decode the file's state into a T with encoding/json.
// It verifies no checksum, and knows no error checkpoint, rolling file,
// compression or damaged file.
func NaiveLatest[T any](dir, prefix string) (T, error) {
	var v struct {
		State T `json:"state"`
	}
	d, err := os.Open(dir)
	if err != nil {
		return v.State, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return v.State, err
	}
	newest := ""
	for _, name := range names {
		if strings.HasPrefix(name, prefix) && strings.HasSuffix(name, ".json") && name > newest {
			newest = name
		}
	}
	if newest == "" {
		return v.State, fs.ErrNotExist
	}
	data, err := os.ReadFile(filepath.Join(dir, newest))
	if err != nil {
		return v.State, err
	}
	err = json.Unmarshal(data, &v)
	return v.State, err
}
