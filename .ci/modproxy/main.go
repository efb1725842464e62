// Command modproxy puts a module of this repository, at a commit, into a
// file-system module proxy (the layout GOPROXY=file://DIR reads), so that CI
// can install the published modules as a user would, from a fresh module
// cache, without a network module proxy knowing them.
//
// Usage:
//
//	modproxy -repo DIR -rev REV [-subdir S] -module PATH -version V -out PROXYDIR
//
// The module's zip is made by golang.org/x/mod/zip from the files git holds
// at REV, with the same rules as the go command's (nested modules and
// vendor directories left out), so its hash is the one a real proxy serves.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", ".", "the repository's directory")
	rev := flag.String("rev", "HEAD", "the commit to package")
	subdir := flag.String("subdir", "", "the module's directory in the repository")
	modPath := flag.String("module", "", "the module path")
	version := flag.String("version", "", "the version to serve it as")
	out := flag.String("out", "", "the proxy's directory")
	flag.Parse()
	if err := run(*repo, *rev, *subdir, *modPath, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(repo, rev, subdir, modPath, version, out string) error {
	if modPath == "" || version == "" || out == "" {
		return fmt.Errorf("-module, -version and -out are required")
	}
	m := module.Version{Path: modPath, Version: version}
	if err := module.Check(m.Path, m.Version); err != nil {
		return err
	}
	escPath, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(m.Version)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	goMod, err := git(repo, "show", rev+":"+path.Join(subdir, "go.mod"))
	if err != nil {
		return err
	}
	when, err := git(repo, "log", "-1", "--format=%cI", rev)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(when)))
	if err != nil {
		return err
	}
	// CreateFromVCS wants the directory that holds .git; in a linked
	// worktree that is the main worktree, which shares its commits. The
	// revision is resolved here first: HEAD is this worktree's.
	hash, err := git(repo, "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return err
	}
	common, err := git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return err
	}
	zf, err := os.Create(filepath.Join(dir, escVersion+".zip"))
	if err != nil {
		return err
	}
	if err := modzip.CreateFromVCS(zf, m, filepath.Dir(strings.TrimSpace(string(common))), strings.TrimSpace(string(hash)), subdir); err != nil {
		zf.Close()
		return fmt.Errorf("zip %s: %w", m, err)
	}
	if err := zf.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, escVersion+".mod"), goMod, 0o644); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, t.UTC()})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, escVersion+".info"), info, 0o644); err != nil {
		return err
	}
	list, err := os.OpenFile(filepath.Join(dir, "list"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(list, m.Version); err != nil {
		list.Close()
		return err
	}
	return list.Close()
}

// git runs git in repo and returns its standard output.
func git(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return b, nil
}
