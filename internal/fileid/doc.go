// Package fileid reads what identifies a file's content from its
// fs.FileInfo where the system says it: the inode change time and the
// device and inode numbers. The directory backend builds an object's
// Version from them; tests use them to wait for a change to be visible.
package fileid
