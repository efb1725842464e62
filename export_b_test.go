package checkpoint

// What the black-box tests of retention, the header index, policies,
// async saves and clocks need of the store's internals.

// The header index: its name, its first line, the checksum table of its
// end line, the size past which it is not read and the number of
// checkpoints from which a store writes it.
const (
	IndexName     = indexName
	IndexMagic    = indexMagic
	IndexMaxSize  = indexMaxSize
	IndexMinWrite = indexMinWrite
)

// IndexCRC is the table of the index's checksum.
var IndexCRC = indexCRC

// MaxAsyncFailures is how many failed background saves a store keeps in
// full; it counts the others.
const MaxAsyncFailures = maxFailures

// TempPrefix is the name of final's temporary files less their random
// digits, as the directory names them.
func TempPrefix(final string) string { return tempPrefix(final) }
