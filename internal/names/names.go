// Package names holds the one rule for the plain names the store writes
// and the directory backend reaches without resolving a path, and the map
// from session IDs (any string) to the names sessions are stored under.
package names

// Plain reports whether s is non-empty, uses only [A-Za-z0-9._-] and does
// not start with a dot: a file name that cannot climb out of a directory,
// hide, or need quoting, on every system.
func Plain(s string) bool {
	if s == "" || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
