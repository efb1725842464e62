// Package listing holds an ability of this module's local directory
// backend that is no part of the storage contract: passing the directory's
// names one by one, without building a listing of them.
package listing

import "context"

// Scanner is a Backend (see package storage) that can call a function
// with each name its List would return, without making a string and an
// Object of each: the local directory on Linux reads its entries into a
// buffer and passes each name from there. Latest finds the newest of
// 10,000 checkpoint names so at little more than the system calls'
// cost. A store takes it from the backend it was given only, never from
// one a Wrapper wraps: a wrapper may change what List returns.
type Scanner interface {
	// ScanNames calls f with the name of each object that List would
	// have returned at the time, in no particular order: every name of
	// the directory but "." and "..", subdirectories and other entries
	// that are no regular file included. name is valid only during the
	// call: f copies what it keeps, and never changes it. ScanNames
	// returns ctx's error if ctx has ended before the scan starts, and
	// the error of reading the directory, as List would.
	ScanNames(ctx context.Context, f func(name []byte)) error
}
